// The health panel: findings from the health engine, shown only when it has some.

import { getJSON, runPath } from "./api";
import { clear, h } from "./dom";
import type { Finding, HealthResponse } from "./types";

export class HealthPanel {
  readonly el = h("section", { class: "card health", id: "health", hidden: "" });

  constructor(private readonly runId: string) {}

  async load(): Promise<Finding[]> {
    const resp = await getJSON<HealthResponse>(`${runPath(this.runId)}/health`);
    this.show(resp);
    return resp.findings;
  }

  show(resp: HealthResponse): void {
    clear(this.el);
    this.el.hidden = !resp.available || resp.findings.length === 0;
    if (this.el.hidden) return;
    this.el.appendChild(h("div", { class: "card-head" }, h("h3", {}, `Health · ${resp.findings.length} finding${resp.findings.length === 1 ? "" : "s"}`)));
    for (const f of resp.findings) {
      const steps = f.first_step === null ? "" : f.last_step !== null && f.last_step !== f.first_step ? `steps ${f.first_step}–${f.last_step}` : `step ${f.first_step}`;
      this.el.appendChild(
        h(
          "div",
          { class: `finding severity-${f.severity.toLowerCase()}` },
          h("div", {}, h("span", { class: "sev" }, f.severity), " ", h("b", {}, f.title), " ", h("span", { class: "muted" }, steps)),
          f.message ? h("p", {}, f.message) : null,
          f.advice ? h("p", { class: "advice" }, f.advice) : null,
          h("p", { class: "muted small" }, `${f.rule_id} · ${f.metrics.join(", ")}`),
        ),
      );
    }
  }
}

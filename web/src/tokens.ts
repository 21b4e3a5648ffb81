// The Tokens page: a project admin's API tokens. Create one (project, right, name): its secret
// is shown once, here, with a copy button, and never again. Revoke one: it is refused from
// the next request on. Tokens of projects this credential does not administer are not listed.

import "./tokens.css";
import { ApiError, getJSON, postJSON } from "./api";
import { h } from "./dom";
import { fmtTime } from "./format";

/** A token as GET /api/tokens lists it (never its secret). */
interface ApiToken {
  id: string;
  name: string;
  project: string;
  right: "read" | "write" | "admin";
  hint: string;
  created_by: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

const RIGHTS: [string, string][] = [
  ["read", "read: see the project's runs"],
  ["write", "write: also send runs, submit, cancel and retry jobs"],
  ["admin", "admin: also create and revoke the project's tokens"],
];

function message(e: unknown): string {
  return e instanceof ApiError || e instanceof Error ? e.message : String(e);
}

export class TokensPage {
  readonly el: HTMLElement;
  private project = h("select", { id: "token-project", "aria-label": "Project" });
  private right = h("select", { id: "token-right", "aria-label": "Right" }, ...RIGHTS.map(([v, label]) => h("option", { value: v }, label)));
  private name = h("input", { id: "token-name", type: "text", maxlength: "128", placeholder: "who or what uses it, e.g. ci-uploader", "aria-label": "Name" });
  private create = h("button", { class: "btn primary", id: "token-create", type: "submit" }, "Create token");
  private secret = h("div", { class: "token-secret", id: "token-secret", hidden: "" });
  private notice = h("div", { class: "notice", role: "status" });
  private rows = h("tbody", { id: "tokens" });
  private empty = h("p", { class: "muted", id: "no-tokens", hidden: "" }, "No token yet.");

  constructor() {
    const form = h("form", { class: "token-form card" }, h("label", {}, "Project ", this.project), h("label", {}, "Right ", this.right), h("label", { class: "grow" }, "Name ", this.name), this.create);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      void this.make();
    });
    const head = h("thead", {}, h("tr", {}, ...["Name", "Project", "Right", "Starts with", "Created by", "Created", "Last used", "State", ""].map((c) => h("th", {}, c))));
    this.el = h(
      "div",
      { class: "tokens", id: "tokens-page" },
      h("h2", {}, "API tokens"),
      h("p", { class: "muted" }, "A token reads or writes one project. Send it as ", h("code", {}, "Authorization: Bearer …"), " or set ", h("code", {}, "RUNWATCH_TOKEN"), "; only its fingerprint is stored."),
      form,
      this.secret,
      this.notice,
      h("section", { class: "card" }, this.empty, h("div", { class: "table-wrap" }, h("table", { class: "table" }, head, this.rows))),
    );
  }

  async load(): Promise<void> {
    try {
      const [server, projects] = await Promise.all([getJSON<{ auth: boolean }>("/server"), getJSON<{ projects: { name: string }[] }>("/projects")]);
      if (!server.auth) this.setNotice("This server was started without a token, so it is open to whoever reaches it and checks no API token. Tokens made here work once it is started with --token (RUNWATCH_TOKEN).");
      this.project.replaceChildren(...projects.projects.map((p) => h("option", { value: p.name }, p.name)));
      await this.refresh();
    } catch (e) {
      this.setNotice(message(e), true);
    }
    this.el.dataset.loaded = "true";
  }

  private async refresh(): Promise<void> {
    const list = await getJSON<{ tokens: ApiToken[] }>("/tokens");
    this.rows.replaceChildren(...list.tokens.map((t) => this.row(t)));
    this.empty.hidden = list.tokens.length > 0;
  }

  private setNotice(text: string, error = false): void {
    this.notice.textContent = text;
    this.notice.className = `notice${error ? " error" : ""}`;
  }

  private async make(): Promise<void> {
    this.create.disabled = true;
    try {
      const made = await postJSON<{ token: ApiToken; secret: string }>("/tokens", { project: this.project.value, right: this.right.value, name: this.name.value.trim() });
      this.showSecret(made.token, made.secret);
      this.name.value = "";
      this.setNotice("");
      await this.refresh();
    } catch (e) {
      this.setNotice(message(e), true);
    } finally {
      this.create.disabled = false;
    }
  }

  /** The new token's secret, this once: it is in no later answer of the server. */
  private showSecret(t: ApiToken, secret: string): void {
    const value = h("code", { id: "token-secret-value" }, secret);
    const copy = h("button", { class: "btn", type: "button" }, "Copy");
    copy.addEventListener("click", () => {
      void navigator.clipboard?.writeText(secret).then(() => (copy.textContent = "Copied"));
    });
    const done = h("button", { class: "btn", type: "button" }, "Done");
    done.addEventListener("click", () => {
      this.secret.replaceChildren();
      this.secret.hidden = true;
    });
    this.secret.replaceChildren(h("p", {}, h("strong", {}, `Token “${t.name}” (${t.right} on ${t.project}). `), "Copy it now: it is not shown again."), h("div", { class: "token-secret-line" }, value, copy, done));
    this.secret.hidden = false;
  }

  private row(t: ApiToken): HTMLElement {
    const action = h("td", {});
    if (!t.revoked_at) {
      const revoke = h("button", { class: "btn danger", "data-revoke": t.id, type: "button", title: "Refuse this token from its next request on." }, "Revoke");
      // a second click confirms: a revoked token cannot be brought back
      revoke.addEventListener("click", () => {
        if (revoke.dataset.armed !== "true") {
          revoke.dataset.armed = "true";
          revoke.textContent = "Click again to revoke";
          return;
        }
        void this.revoke(t, revoke);
      });
      action.append(revoke);
    }
    const state = t.revoked_at ? h("span", { class: "token-revoked" }, `Revoked ${fmtTime(t.revoked_at)}`) : h("span", { class: "token-active" }, "Active");
    return h(
      "tr",
      { "data-token": t.id, "data-name": t.name },
      h("td", {}, t.name),
      h("td", {}, t.project),
      h("td", {}, t.right),
      h("td", { class: "mono" }, `${t.hint}…`),
      h("td", {}, t.created_by),
      h("td", {}, fmtTime(t.created_at)),
      h("td", {}, fmtTime(t.last_used_at)),
      h("td", { class: "token-state" }, state),
      action,
    );
  }

  private async revoke(t: ApiToken, button: HTMLButtonElement): Promise<void> {
    button.disabled = true;
    try {
      await postJSON(`/tokens/${encodeURIComponent(t.id)}/revoke`);
      this.setNotice(`Token “${t.name}” is revoked.`);
      await this.refresh();
    } catch (e) {
      button.disabled = false;
      this.setNotice(message(e), true);
    }
  }
}

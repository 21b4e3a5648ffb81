// The "+ New job" page: a form that submits a built-in recipe or any command to the queue
// (POST /api/jobs); the new run opens at once, QUEUED. An error the API answers is shown
// next to the field it names, else under the form.

import { ApiError, getJSON, postJSON } from "./api";
import { h } from "./dom";
import { CLI_JOBS, SDK_LOOP } from "./recording";
import type { ActionAnswer, Recipe, RecipeList, RecipeSetting } from "./types";

// Recipe settings the job's own fields set (the name and project) or that the queue
// decides (where the run's folder is), so the form does not offer them twice.
const JOB_OWNED = new Set(["name", "project", "runs_dir", "resume"]);

/** A command line split into arguments as a POSIX shell would: quotes and backslashes. */
function splitCommand(line: string): string[] {
  const args: string[] = [];
  let cur = "";
  let started = false;
  let quote: "'" | '"' | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote === "'") {
      if (c === "'") quote = null;
      else cur += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === "\\" && i + 1 < line.length && '"\\$`'.includes(line[i + 1])) cur += line[++i];
      else cur += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      started = true;
    } else if (c === "\\" && i + 1 < line.length) {
      cur += line[++i] === "\n" ? "" : line[i];
      started = true;
    } else if (/\s/.test(c)) {
      if (started) args.push(cur);
      cur = "";
      started = false;
    } else {
      cur += c;
      started = true;
    }
  }
  if (quote) throw new Error(`The command has an unclosed ${quote} quote; close it or remove it.`);
  if (started) args.push(cur);
  return args;
}

/** A form value the page refuses before sending it, and the field it is about. */
class FieldError extends Error {
  constructor(
    message: string,
    readonly field: string,
  ) {
    super(message);
  }
}

/** A whole number from a number input, at least `least` when given; else a FieldError. */
function whole(el: HTMLInputElement, key: string, label: string, least: number | null): number {
  const n = Number(el.value);
  if (el.value.trim() === "" || !Number.isInteger(n) || (least !== null && n < least)) {
    throw new FieldError(`${label} must be a whole number${least === null ? "" : ` of at least ${least}`}.`, key);
  }
  return n;
}

function field(label: string, key: string, input: HTMLElement, help?: string): HTMLElement {
  return h(
    "label",
    { class: "field", "data-field": key },
    h("span", { class: "field-label" }, label),
    input,
    help ? h("span", { class: "field-help muted" }, help) : null,
    h("span", { class: "field-error", "data-error-for": key, role: "alert" }),
  );
}

function shown(value: unknown): string {
  if (value === null || value === undefined) return "none";
  return typeof value === "string" ? value : JSON.stringify(value);
}

export class NewJobPage {
  readonly el: HTMLElement;
  private form = h("form", { class: "job-form", id: "job-form", novalidate: "" });
  private kindRecipe = h("input", { type: "radio", name: "kind", value: "recipe", id: "kind-recipe" });
  private kindCommand = h("input", { type: "radio", name: "kind", value: "command", id: "kind-command" });
  private recipe = h("select", { id: "recipe", "aria-label": "Recipe" });
  private recipeHelp = h("p", { class: "muted", id: "recipe-help" });
  private filter = h("input", { type: "search", id: "setting-filter", placeholder: "Find a setting", "aria-label": "Find a setting" });
  private settingsEl = h("div", { class: "settings-grid", id: "recipe-settings" });
  private command = h("textarea", { id: "command", rows: "3", spellcheck: "false", placeholder: "python train.py --learning_rate 1e-4" });
  private argvPreview = h("p", { class: "muted small", id: "argv-preview" });
  private cwd = h("input", { type: "text", id: "job-cwd", placeholder: "the server's working folder" });
  private name = h("input", { type: "text", id: "job-name", placeholder: "made from the recipe or command", autocomplete: "off" });
  private project = h("input", { type: "text", id: "job-project", placeholder: "none", autocomplete: "off" });
  private devices = h("input", { type: "number", id: "job-devices", min: "1", step: "1", value: "1" });
  private profile = h("select", { id: "job-profile" });
  private priority = h("input", { type: "number", id: "job-priority", step: "1", value: "0" });
  private maxAttempts = h("input", { type: "number", id: "job-max-attempts", min: "1", step: "1", value: "1" });
  private submit = h("button", { class: "btn primary", type: "submit", id: "submit-job" }, "Submit job");
  private formError = h("p", { class: "error", id: "form-error", role: "alert" });
  private recipeSection: HTMLElement;
  private commandSection: HTMLElement;
  private recipes: Recipe[] = [];
  private inputs = new Map<string, { setting: RecipeSetting; input: HTMLInputElement | HTMLSelectElement }>();

  constructor(
    private readonly onCreated: (runId: string) => void,
    onBack: () => void,
  ) {
    const back = h("button", { class: "btn", type: "button" }, "← Back to runs");
    back.addEventListener("click", onBack);
    this.recipeSection = h(
      "section",
      { class: "card", id: "recipe-form" },
      field("Recipe", "recipe", this.recipe),
      this.recipeHelp,
      h("div", { class: "card-head" }, h("h3", {}, "Settings"), this.filter),
      h("p", { class: "muted small" }, "Leave a setting empty to keep its default."),
      this.settingsEl,
    );
    this.commandSection = h(
      "section",
      { class: "card", id: "command-form", hidden: "" },
      field("Command", "argv", this.command, "One command line, quoted as in a shell. A script that calls runwatch.init() records into this job's run."),
      this.argvPreview,
      field("Working folder", "cwd", this.cwd, "A folder on the server's machine, where the command runs; a relative one is read from the server's own."),
    );
    const job = h(
      "aside",
      { class: "card job-side" },
      h("h3", {}, "Job"),
      field("Name", "name", this.name),
      field("Project", "project", this.project),
      field("Device profile", "device_profile", this.profile),
      h("div", { class: "field-pair" }, field("Devices", "devices", this.devices), field("Priority", "priority", this.priority, "Higher runs first.")),
      field("Max attempts", "max_attempts", this.maxAttempts, "A failed attempt is run again until this many have run."),
      this.submit,
      this.formError,
    );
    const kinds = h(
      "div",
      { class: "kind-switch", role: "radiogroup", "aria-label": "What to run" },
      h("label", {}, this.kindRecipe, " Built-in recipe"),
      h("label", {}, this.kindCommand, " Command"),
    );
    this.form.append(h("div", { class: "job-main" }, kinds, this.recipeSection, this.commandSection), job);
    this.el = h(
      "div",
      { class: "new-job", id: "new-job" },
      h("div", { class: "page-head" }, back, h("h2", {}, "New job")),
      h("p", { class: "muted" }, "The job is queued at once and a worker runs it when devices are free; its run opens here, QUEUED."),
      this.form,
      h(
        "details",
        { class: "card", id: "record-yourself" },
        h("summary", {}, h("h3", {}, "Record a run from your own training loop")),
        h("p", {}, "Any Python loop records a run with the SDK:"),
        h("pre", { class: "code" }, SDK_LOOP),
        h("pre", { class: "code" }, CLI_JOBS),
      ),
    );
    this.kindRecipe.checked = true;
    for (const k of [this.kindRecipe, this.kindCommand]) k.addEventListener("change", () => this.showKind());
    this.recipe.addEventListener("change", () => this.showRecipe());
    this.filter.addEventListener("input", () => this.applyFilter());
    this.command.addEventListener("input", () => this.previewArgv());
    this.form.addEventListener("submit", (e) => {
      e.preventDefault();
      void this.send();
    });
  }

  async load(): Promise<void> {
    try {
      const list = await getJSON<RecipeList>("/recipes");
      this.recipes = list.recipes;
      this.recipe.replaceChildren(...list.recipes.map((r) => h("option", { value: r.name }, `${r.name} (${r.method.toUpperCase()})`)));
      this.profile.replaceChildren(...list.device_profiles.map((p) => h("option", { value: p.name }, `${p.name} · ${p.devices} device${p.devices === 1 ? "" : "s"} · ${p.hourly_rate}/device-hour`)));
      this.profile.value = list.default_profile;
      this.showRecipe();
    } catch (e) {
      this.formError.textContent = `The recipes could not be loaded, so only the command form works. ${e instanceof Error ? e.message : String(e)}`;
      this.kindCommand.checked = true;
      this.showKind();
    }
    this.el.dataset.loaded = "true";
  }

  private get kind(): "recipe" | "command" {
    return this.kindCommand.checked ? "command" : "recipe";
  }

  private showKind(): void {
    this.recipeSection.hidden = this.kind !== "recipe";
    this.commandSection.hidden = this.kind !== "command";
    this.clearErrors();
  }

  private showRecipe(): void {
    const recipe = this.recipes.find((r) => r.name === this.recipe.value);
    this.inputs.clear();
    this.recipeHelp.textContent = recipe?.help ?? "";
    this.settingsEl.replaceChildren(
      ...(recipe?.settings ?? []).filter((s) => !JOB_OWNED.has(s.name)).map((s) => {
        const input = this.settingInput(s);
        this.inputs.set(s.name, { setting: s, input });
        return field(s.name, `settings.${s.name}`, input, s.help);
      }),
    );
    this.applyFilter();
  }

  private settingInput(s: RecipeSetting): HTMLInputElement | HTMLSelectElement {
    const attrs = { name: s.name, "data-setting": s.name, "aria-label": s.name };
    if (s.type === "bool") {
      return h("select", attrs, h("option", { value: "" }, `default (${shown(s.default)})`), h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false"));
    }
    const numeric = s.type === "int" || s.type === "float";
    return h("input", { ...attrs, type: "text", placeholder: shown(s.default), autocomplete: "off", ...(numeric ? { inputmode: "decimal" } : {}) });
  }

  private applyFilter(): void {
    const q = this.filter.value.trim().toLowerCase();
    for (const el of this.settingsEl.querySelectorAll<HTMLElement>(".field")) {
      el.hidden = q !== "" && !(el.textContent ?? "").toLowerCase().includes(q);
    }
  }

  private previewArgv(): void {
    try {
      const argv = splitCommand(this.command.value);
      this.argvPreview.textContent = argv.length ? `Runs ${JSON.stringify(argv)}` : "";
    } catch (e) {
      this.argvPreview.textContent = e instanceof Error ? e.message : String(e);
    }
  }

  /** The request body; a field the form can tell is wrong throws a FieldError. */
  private body(): Record<string, unknown> {
    const body: Record<string, unknown> = {
      kind: this.kind,
      devices: whole(this.devices, "devices", "Devices", 1),
      device_profile: this.profile.value || undefined,
      priority: whole(this.priority, "priority", "Priority", null),
      max_attempts: whole(this.maxAttempts, "max_attempts", "Max attempts", 1),
    };
    if (this.name.value.trim()) body.name = this.name.value.trim();
    if (this.project.value.trim()) body.project = this.project.value.trim();
    if (this.kind === "recipe") {
      body.recipe = this.recipe.value;
      const settings: Record<string, string> = {};
      for (const [key, { input }] of this.inputs) if (input.value.trim() !== "") settings[key] = input.value.trim();
      body.settings = settings;
    } else {
      try {
        body.argv = splitCommand(this.command.value);
      } catch (e) {
        throw new FieldError(e instanceof Error ? e.message : String(e), "argv");
      }
      if ((body.argv as string[]).length === 0) throw new FieldError("Write the command to run, such as python train.py.", "argv");
      if (this.cwd.value.trim()) body.cwd = this.cwd.value.trim();
    }
    return body;
  }

  private async send(): Promise<void> {
    this.clearErrors();
    let body: Record<string, unknown>;
    try {
      body = this.body();
    } catch (e) {
      if (!(e instanceof FieldError)) throw e;
      this.showError(e.message, e.field);
      return;
    }
    this.submit.disabled = true;
    try {
      const created = await postJSON<ActionAnswer>("/jobs", body);
      this.onCreated(created.run.run_id);
    } catch (e) {
      this.showError(e instanceof Error ? e.message : String(e), e instanceof ApiError ? e.field : null);
    } finally {
      this.submit.disabled = false;
    }
  }

  /** The message next to the field it is about when the form has that field, else under the form. */
  private showError(message: string, key: string | null): void {
    if (key?.startsWith("settings.") && this.filter.value) {
      this.filter.value = "";
      this.applyFilter();
    }
    const slot = key ? this.el.querySelector<HTMLElement>(`[data-error-for="${CSS.escape(key)}"]`) : null;
    if (slot && slot.closest<HTMLElement>("[hidden]") === null) {
      slot.textContent = message;
      slot.closest(".field")?.classList.add("invalid");
      slot.closest(".field")?.querySelector<HTMLElement>("input, select, textarea")?.focus();
    } else {
      this.formError.textContent = message;
    }
  }

  private clearErrors(): void {
    this.formError.textContent = "";
    for (const slot of this.el.querySelectorAll<HTMLElement>(".field-error")) slot.textContent = "";
    for (const f of this.el.querySelectorAll(".field.invalid")) f.classList.remove("invalid");
  }
}

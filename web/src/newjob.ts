// The "+ New job" page: how to start a run that shows up in this list.

import { h } from "./dom";

const SDK = `import runwatch

run = runwatch.init(
    project="my-project",
    name="sft-qwen-0.5b",
    method="sft",
    base_model="Qwen/Qwen2.5-0.5B",
    dataset="my-dataset",
    trainer="my-loop",
    backend="local",
    config={"learning_rate": 2e-5, "batch_size": 8},
    dir="runs",
)
for step in range(num_steps):
    loss = train_step()
    run.log({"loss": loss, "learning_rate": lr}, step=step)
run.finish("SUCCEEDED")`;

const CLI = `# watch a folder of run directories (this page's server)
runwatch ui runs/

# a long-lived team server; non-loopback binds need a token
RUNWATCH_TOKEN=... runwatch server --db sqlite:///runwatch.db --runs-dir runs --host 0.0.0.0

# run a bundled recipe
runwatch recipes`;

export function newJobPage(onBack: () => void): HTMLElement {
  const back = h("button", { class: "btn" }, "← Back to runs");
  back.addEventListener("click", onBack);
  return h(
    "div",
    { class: "new-job", id: "new-job" },
    back,
    h("h2", {}, "Start a new job"),
    h("p", {}, "A run appears here as soon as its training process writes its run directory. Record a run from any Python training loop with the SDK:"),
    h("pre", { class: "code" }, SDK),
    h("p", {}, "Then point runwatch at the folder, or send runs to a server:"),
    h("pre", { class: "code" }, CLI),
  );
}

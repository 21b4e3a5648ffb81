// How to record a run: the SDK and CLI lines the New job page folds under its form, and
// the guide shown in place of the run pane while the runs folder holds no run yet.

import { h } from "./dom";

/** A whole training loop with the SDK (the New job page). */
export const SDK_LOOP = `import runwatch

run = runwatch.init(project="my-project", name="sft-qwen-0.5b", method="sft",
                    base_model="Qwen/Qwen2.5-0.5B", dataset="my-dataset", dir="runs")
for step in range(num_steps):
    loss = train_step()
    run.log({"loss": loss, "learning_rate": lr}, step=step)
run.finish("SUCCEEDED")`;

/** The jobs of the New job page from a terminal. */
export const CLI_JOBS = `# the same jobs from a terminal
runwatch submit recipes sft max_steps=200 --project demo
runwatch submit --devices 1 -- python train.py --lr 1e-4

# a run your own script starts is listed too: point runwatch at its folder
runwatch ui runs/`;

// README.md's "Record a run": the SDK's two lines in a loop
const SDK_FIRST = `import runwatch

with runwatch.init(project="demo", name="sft-1", method="sft") as run:
    for step in range(1000):
        run.log({"loss": loss, "learning_rate": lr}, step=step)`;

const SUBMIT_FIRST = `runwatch submit recipes sft max_steps=100
runwatch submit -- python train.py`;

/** What a runs folder with no run in it shows: how to record the first one. */
export function firstRunGuide(): HTMLElement {
  return h(
    "section",
    { class: "card first-run", id: "first-run" },
    h("h3", {}, "No runs yet"),
    h("p", {}, "Record one from any Python training loop with the SDK. It writes the run into the folder ", h("code", {}, "dir"), " names (", h("code", {}, "runs/"), " by default); served by ", h("code", {}, "runwatch ui runs"), ", the run shows here as it logs:"),
    h("pre", { class: "code" }, SDK_FIRST),
    h("p", {}, "Or queue a job for a worker: ", h("strong", {}, "+ New job"), ", or from a terminal:"),
    h("pre", { class: "code" }, SUBMIT_FIRST),
  );
}

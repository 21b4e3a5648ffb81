"""docs/health.md's second part: how the rules are scored on the labelled corpus of real
logs and the protocol that keeps held-back runs unseen. `{classes}` is filled with the
rule-to-class table."""

SCORE = """## Score on real logs

`runwatch health-eval [--split train|holdout|all] [-o json]` (and `make bench`, as
`bench/bench_health_eval.py`) replays each run of the labelled corpus in
`tests/data/real` one logged step at a time through the live path (the run's lines
appended to its folder, the indexer and its health hook, the findings table read after
each line; after the last line, the run's end, SUCCEEDED, appended to its events as the
SDK's finish writes it, so `loss.flat_finished_run` is detected at the last line), so a
finding is detected at the step a live user would see it. Per class
it prints recall (labelled runs with a finding of the class), precision (those against
every run with such a finding), and the median delay from the labelled onset to the
first finding, in logged points and in steps (negative: it came before the step the
label names). A labelled run counts as found on a finding of its class of any severity,
info included; the summary line adds how many were told by a warning or worse, the same
bar a healthy run is judged by. A healthy run with a finding of warning or worse is a false
alarm (at the highest severity the finding reaches: an info that holds long enough becomes
a warning);
the summary line gives both shares (pathologies found, healthy runs warned) with their
95% Wilson intervals, since a few hundred runs measure a share to several points either
way (128 of 149 found reads 86%, 79-91%, so 90% lies within the corpus's own noise of
it, and 0 warned in 250 would read 0-2%, not a rate of 0);
`run.stalled` is listed apart, since it reads wall-clock gaps between log lines that
the labels do not judge. Held-back runs (`split: holdout`) stay out of tuning;
the score is printed for `train`, for `holdout`, for every run, and for each `round` of
held-back runs (`--round N` scores one round alone). The summary line also counts the
healthy runs with an info and no warning ("2 more with an info only"; `with_infos_only` in
`-o json`): no false alarm by the score's bar, but a finding a user reads all the same.
Under it, the table names each train run with a warning and its rules, and gives the
held-back ones as counts by rule only, since a held-back run's findings are not read run
by run; `-o wide`'s column of missed runs likewise names train runs and counts held-back
ones (`-o json` holds every run, for the lead who spends a round).
Of the healthy runs warned, the line says how many had every warning resolved by the
run's end ("1 of them resolved by the run's end"; `warnings_resolved_by_end`, and each
finding's `open_at_end` in `-o json`): a false alarm the engine took back, which a user
saw while it held (a reward flat over its first 30 points that rose after).

The findings of these rules count toward these classes:

{classes}

### Protocol and its history

1. A held-back run is chosen before the change it would judge. It is labelled by reading
   its log (the numbers in `evidence`), never by reading findings.
2. Rules and aliases are changed against `train` runs and synthetic trigger / near-miss
   series only. A change made after a held-back run's result was seen, or made with a
   held-back run in mind, spends that run: it moves to `train` with `left_holdout` saying
   why, and is never counted as held back again.
3. New held-back runs are added as a new `round`, committed with their labels before the
   engine runs on them, and the round is scored once; that figure is reported as measured.

What happened so far:

- Round 1 (the first corpus, 27 runs, 9 held back) was scored before and after the issue
  14 changes of an earlier session (20% and 80% recall). One change was checked on
  held-out runs while debugging (the spike detector's noise is refreshed every point in a
  young run: a stale estimate still held the steep start of the loss). The miss
  `grpo_deepretrieval` needed an alias (`flat_reward_group_ratio`), which was refused at
  the time.
- Session 4 improved the engine on `train` and synthetic series (aliases from TRL's
  PPO/RLOO and older PPO trainers, verl, Stable-Baselines3; trend windows in steps), and
  then added the refused alias. Three round-1 runs were therefore spent and moved to
  `train`: `grpo_deepretrieval` (the alias), `ppo_lunar_progress_csv` (the
  Stable-Baselines3 alias was added knowing this run logs `rollout/ep_rew_mean`) and
  `other_nanogpt_wandb_chart_lastspike` (the spike change above). The six other round-1
  runs stay held back; they have been scored before, so round 2 is the clean figure.
- Round 2: 7 new public logs (source, path and commit in each `source.json`), labelled
  from their logs after the engine changes were committed and before any replay; scored
  once in session 4 (below).
- Session 5 fixed what round 2 missed, so round 2 is spent: its 7 runs moved to `train`
  (`left_holdout` says why), and the KL-growth onset of `grpo_verl_mixed_cuts_divergence`
  was corrected from step 20 to step 1 (`relabelled` says why: `actor/kl_loss` climbs from
  the first log). The changes were made from the trainers' sources, not from those files:
  every metric name verl (`metric_utils.py`, the actor's and the reward-KL metrics, the
  `val-core/<source>/<acc|reward>/mean@N` core validation key at any N), TRL (GRPO, RLOO,
  DPO, online DPO, PPO), OpenRLHF (PPO, SFT, DPO) and tinker-cookbook (RL, supervised,
  on-policy distillation) log and that has a canonical metric is mapped
  ([metrics.md](metrics.md)); `rl.no_progress` judges the task score (`accuracy`) of a run
  that logs no reward; and on-policy distillation's reverse KL to the teacher
  (tinker-cookbook's `teacher_kl`, a loop's `reverse_kl`) reads as minus the reward, since
  minus that KL is the advantage those runs maximise. Each change has a trigger series and
  a near miss in `tests/health/test_engine.py`. `grpo.reward_hacking` findings now count
  toward a `reward_hacking` class.
- Round 3: 6 new public logs, chosen for pathologies the held-back runs lacked (KL growth
  with reward hacking, entropy collapse, a reward with no signal) and a healthy sibling,
  labelled from their logs and committed before the engine ever ran on them; scored once
  (below). No public DPO over-optimisation or NaN log with a findable source was found in
  the time: those classes are still held back by nothing.

- Session 6 fixed what round 3 missed, so round 3 is spent: its 6 runs moved to `train`
  (`left_holdout` says why). The changes, each with a trigger series and a near miss in
  `tests/health`: `grpo.kl_ref_growing` now also needs the latest half of its window to
  still rise (at half the rate or more and by 4 widths of the KL's point-to-point noise),
  so a KL that rises once and settles under its penalty is no longer growth;
  `grpo.kl_ref_spike` measures a rise against a median of at least 0.05 nats, since a KL
  starts at 0 and its first rise is growth; new rules `grpo.reward_std_zero` (the reward's
  spread within groups under 0.001) and `grpo.no_gradient` (a gradient norm of exactly 0
  on 3 of 10 steps) count toward `reward_zero_variance`, and `grpo.perplexity_hacking`
  (validation perplexity doubling over 6 validations while the validation reward does not
  fall; a perplexity is read as the validation loss, its log) toward `reward_hacking`;
  `policy/entropy` (a generic name of hand-written loops) maps to `entropy`, and
  `train_reward_std` to `reward_std`. On the whole corpus the healthy runs with a warning
  went from 1 to 0; one train run labelled `rl_no_progress` (`grpo_stats_safety_unsloth`,
  one group of 4 per step whose `reward_std` is 0 on many steps and whose loss is 0
  throughout) now also has a `reward_zero_variance` finding, counted as a false positive
  of that class since its label names no second pathology.
- Round 4: 5 new public logs (source, path and commit in each `source.json`), labelled from
  their logs after the session 6 changes were committed, committed before the engine ever
  ran on them, and scored once (below). All 5 are SFT runs a careful reader calls healthy:
  no public GRPO, PPO or DPO log with a pathology and a findable source turned up in the
  time, so round 4 measures false alarms on new logs, not recall.
"""

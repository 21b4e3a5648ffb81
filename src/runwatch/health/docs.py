"""Writes docs/health.md from the rule catalogue: `python -m runwatch.health.docs [PATH]`.

The catalogue is the source of truth; a test fails when the page misses a rule.
"""

from __future__ import annotations

import sys

from runwatch.health.rules import CATALOGUE, Rule
from runwatch.health.rules.base import ALL_METHODS
from runwatch.health.scoring import RULE_CLASSES
from runwatch.metrics.docs import write_generated

INTRO = """# Health rules

runwatch evaluates these rules on every run as its metrics arrive. Each rule reads a
few metrics (by canonical name; other frameworks' names are mapped to it by the aliases
in [metrics.md](metrics.md)), tests a condition, and raises a **finding** with a
severity, the step range and values that triggered it, and advice that names the
setting to change. A finding *opens* when its condition starts to hold, *updates* while
it holds, and *resolves* when it stops; each new episode is a new finding.

Read findings with `runwatch runs health RUN` (`-o json`, `--fail-on warning|critical`
for scripts), in the run page of the web app (markers on the charts), or through the
API. Severities: `info` (worth knowing), `warning` (likely costs you the run's
quality or money), `critical` (the run is broken or the result is not to be trusted).

## Detectors

Rules are built from a few shared detectors, each evaluated incrementally (the cost of
new points does not grow with the run's history). Points arrive in seq order from a run
folder; a batch sent over HTTP after a later one makes the run be evaluated again whole,
so no stored point escapes the rules.

{detectors}

## Overriding thresholds

Every parameter below can be overridden per project; the defaults are the spec's values.
Store a project's overrides with `runwatch thresholds PROJECT FILE` (or through the API;
`--clear` removes them) and its runs are re-evaluated; try a file on one run without
storing anything with `runwatch runs health RUN --thresholds FILE`. Budget rules read
their budget (`max_sample_tokens`, `batch_size`, …) from the run's `config.yaml` at any
depth; `settings` supplies one the config lacks.

```yaml
rules:
  grpo.clip_high: {above: 0.15}
  optim.grad_norm_spike: {factor: 20}
  val.plateau: {enabled: false}
  grpo.truncation: {severity: info}
settings:            # budgets the run's config does not give
  max_sample_tokens: 1024
```

## Findings

A finding carries `rule_id`, `severity`, `status` (`open` or `resolved`), `metric`,
`first_step` (the first point that crossed the limit in the window that opened it; for
a trend, the first step of the window it judged) and `last_step` (the latest step the
condition held at), `evidence` (the values of the
points that crossed the limit: `first`, `last`, `min`, `max`, `count`, plus the
detector's context such as the rolling `median`, a trend's `effect` or the `budget`), a
`message` and the `advice`. Non-finite values appear in
evidence as the text `NaN`, `Infinity` or `-Infinity`. A `run.stalled` finding of a run
still running is computed when findings are read (its `id` is null); once metrics arrive
again the stall is stored as resolved.

One cause at one step is one finding: every metric that is NaN or infinite at the same
logged steps joins one `metric.non_finite` incident (consecutive bad steps extend it),
whose `evidence.metrics` and `metrics` list them all and whose message names them
("loss, grad_norm and rewards/margins were NaN at step 18."). Findings of event rules
(spikes, jumps, non-finite values) that start at the same step are listed as one
incident: the most severe leads (its id, rule and advice), the messages follow one
another, `metrics` names every metric and `evidence.incident` keeps each merged
finding's rule id, id, severity, metric and message. Findings of rules that judge one
signal at different speeds (an entropy falling, collapsing and fallen to a quarter; see
`Rule.signal`) whose steps overlap are listed as one the same way, starting at the first
of them; its message is the lead's, naming the others by their titles (their own messages
would say the same thing again). Repeated loss spikes within
`hold` points are one `loss.spike` finding, which turns from info to warning at the
second. Messages state changes in words with their numbers ("loss fell only 2.0% over
897 steps (0.69 to 0.676)."), and a resolved finding describes what held, not the
change that ended it.

## Judging with few points and a warm-up

Trend rules wait for their window (a `trend` needs half its buckets, `no_progress` its
`warmup` of 30 logged points, or in a run logged sparsely `warmup_steps` (200) training
steps and at least `min_points` (10) logged points) so the noisy first steps of a run (a
learning-rate warm-up, a DPO loss sitting at log 2) cannot raise them, and "where it
started" is the higher of the first value and the first bucket's median, so a loss that
dropped in its first points and then drifts down slowly has fallen. The warm-up in steps
is why a loss logged every 50 steps is judged after 10 logs (500 steps), not after 30
(1,500 steps); with 200 steps no healthy `train` run raises it, while 10 points alone
raise it on two (a DPO loss at step 10, an SFT loss at step 45, both still in their
first fall). Where a run logs too few points for a k-of-n
rule, an extreme value is enough on its own: `grpo.truncation_extreme` (most
completions cut on one step), `grpo.no_signal` (no group with reward variance on 3
logged steps in a row), `dpo.over_optimisation` (one margin above 20). Rules that judge
against noise (`loss.spike`, `rl.no_progress`) measure it on the series itself, so a
run logged every 10 steps is judged on its own scale. Before `rl.no_progress` has the
10 points it measures noise on, from 4 points on it says (info) that a reward has not
risen at all: the median of its latest half not above its first half's, its Theil–Sen
slope not above 0 and its latest point not above the first half's median (one measure
alone flickers on a noisy rise: on simulated rewards rising 0.4 noise widths a point, the
three together open an early finding in 18% of runs, the median pair alone in 30%). The
early finding holds until the 10th point, where the rule judges afresh, so from there on
the verdicts are the noise test's alone and an early finding never holds a reward that
test would release.

A run is judged by its method's rules: ORPO, KTO, SimPO and CPO runs as DPO; PPO,
RLOO, DAPO, GSPO, Dr. GRPO, REINFORCE and on-policy distillation (`opd`) as GRPO; off-policy
`distillation` as SFT. A method the engine does not know gets the rules for every method.
IPO is not judged as DPO: its loss, (h − 1/(2τ))², is near 0 with accuracy 1 on a healthy
run, which is what `dpo.loss_collapsed` reads as over-optimisation.

A rule that reads one of several metrics (`exclusive`: `rl.no_progress` reads the reward,
or the task score of a run that logs no reward; the validation rules read the first of
their validation metrics) runs on the first in its order that the run logs, also when
that one appears after another: a loop that logs its held-out accuracy at step 0 and
its reward from step 1 is judged on the reward.

Trend rules whose window is a number of training steps (`window_in=steps`: the ratio,
log-probability, parse-failure, entropy and KL trends) learn the run's logging stride
from its first three logged steps (the median gap) and judge `window` ÷ stride logged
points, never fewer than `min_window` (8): a run logged every 10 steps judges 32 steps of
entropy on 8 points instead of waiting for 32 points (320 steps). The points logged
before the stride is known are kept and fed to those rules when they start, so a run fed
a step at a time is judged as if read whole. A run logged every step is unchanged.

Why these thresholds: TRL's `rewards/margins` is β-scaled and healthy DPO runs end at a
few units (2.8 and 4.0 in the corpus), so 20 is far outside them (OpenRLHF logs the
β-scaled chosen and rejected rewards and no margin: their difference is the margin); a
spike is 6 robust standard deviations of the loss's own step-to-step change and at least
5% of its level (a noisy loss moves ±25% a step without being wrong), and a spike's rise
and its fall back are left out of that noise, so a second spike a few points later is
judged against the loss's own noise, not one the first spike widened (it was hidden
before: two spikes of 80% three points apart read as one info finding); a reward is
"not improving" when the median of its latest half has gained less than one standard
error of the difference of the two medians over the first half (at least 10 points, at
most 25 on each side), once held it takes twice that gain on 6 judgements in a row to
release (a flat reward's recent median wanders; 5,000 flat noisy points give one
finding, not five), and it is info until judged on 30 points (ten points of a reward may
yet move; the default GRPO recipe's 20 steps gain about one noise width) with the
opening condition itself holding there: a reward that rises steadily but slowly (0.0025
a point against a noise of 0.03) sits between one and two standard errors, keeps its
finding open and stays info, where it used to become a warning at 30 points; a loss
"turning back up" rises by half its level over 16 points, well beyond the wander of a
settled loss. An entropy that falls to a quarter of where it started (the median of its
first points, so one high first log is no fall; `grpo.entropy_low`) has collapsed
whatever the window: in the corpus the largest fall
of an entropy not labelled as collapsing is 38% (0.50 to 0.31), and a collapse slower
than half in 32 steps (1.2 to 0.1 over 400 steps) or in a run of 4 points escaped the
trend rule. A KL still climbing after 0.1 nats over 512 steps (`grpo.kl_ref_drift`) is
the slow form of `grpo.kl_ref_growing` (0.6 nats over 2,000 steps rises 0.02 in a
64-step window), with the same test that its latest half still climbs, so a KL that
rose once and is held by its penalty stays silent.

## Stress set

`tests/health/stress.py` writes each class of the issue (DPO over-optimisation, NaN
incidents, a loss spike, repeated spikes, RL without progress, entropy collapse, KL
growth, groups without reward variance, overfitting with sparse evaluation) in the
metric names of TRL, verl, OpenRLHF, tinker-cookbook, TensorBoard (the HF Trainer's
`train/` prefix) and a hand-written loop, logged every 1, 5, 10 and 50 steps, over 4 to
2,000 logged points, and `tests/health/test_stress.py` checks a finding of the class
comes, and that healthy runs in the same names, strides and lengths raise no warning.
What it found and what changed: OpenRLHF's DPO was never judged (no margin), repeated
spikes read as one info finding, entropy that collapses slowly or in a short run and KL
that grows slowly were missed, and a healthy reward rising slowly warned at 30 points
(all fixed above). What it still misses, so not checked there:

- a loss spike in fewer than 16 logged points (the noise it is judged against needs 10
  changes), and RL without progress under 10 points is a chance verdict (the early one);
- KL growth in fewer than 40 points, or slower than 0.1 nats per 512 steps (0.6 nats
  over 10,000 steps logged every 50);
- groups without reward variance in 4 points that are not all above 0.95;
- overfitting over hundreds of evaluations rising less than 2% per 6 of them;
- a loss that jumps and stays up in fewer than 40 points while it still falls steeply
  (the jump hides in its own fall), and a loss at chance logged every step before 30
  points (`loss.stuck` waits for 50 steps).

Session 8 added a loss pinned at 0, a loss at chance and a loss that jumps and stays up,
and three more sets of names: a loop's `train_loss`, `val_loss` and `reward/mean`,
NeMo's `reduced_train_loss` and `val_loss`, Lightning's `train_loss_step` and `val_loss`
(the plain loop's `val_loss` is read too now).

## Score on real logs

`runwatch health-eval [--split train|holdout|all] [-o json]` (and `make bench`, as
`bench/bench_health_eval.py`) replays each run of the labelled corpus in
`tests/data/real` one logged step at a time through the live path (the run's lines
appended to its folder, the indexer and its health hook, the findings table read after
each line), so a finding is detected at the step a live user would see it. Per class
it prints recall (labelled runs with a finding of the class), precision (those against
every run with such a finding), and the median delay from the labelled onset to the
first finding, in logged points and in steps (negative: it came before the step the
label names). A healthy run with a finding of warning or worse is a false alarm;
`run.stalled` is listed apart, since it reads wall-clock gaps between log lines that
the labels do not judge. Held-back runs (`split: holdout`) stay out of tuning;
the score is printed for `train`, for `holdout`, for every run, and for each `round` of
held-back runs (`--round N` scores one round alone).

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

#### Measured in session 4 (34 runs: 21 train, 13 held back of which 7 in round 2)

| split | pathologies found | healthy runs with a warning | median delay (points) |
|---|---|---|---|
| train | 13 of 14 (93%) | 0 of 7 | 2 |
| holdout (rounds 1 and 2) | 5 of 6 (83%) | 0 of 7 | 7.5 |
| holdout round 1 | 3 of 3 (100%) | 0 of 3 | 4.5 |
| holdout round 2 | 2 of 3 (67%) | 0 of 4 | 9 |
| all | 18 of 20 (90%) | 0 of 14 | 5 |

Per class on the held-back runs (runs, found, precision, median delay in points / steps):
`rl_no_progress` 4, 2, 100%, 10 / 28; `length_truncation` 2, 2, 100%, -8.5 / -52.5;
`overfitting` 1, 1, 100%, 0 / 0; `entropy_collapse` 1, 1, 100%, 6 / 6; `kl_growth` 1, 1,
100%, 12 / 12; `loss_not_falling` 1, 1, 100%, 29 / 290. On `train`: `rl_no_progress` 4,
3, 60% (the flat reward of two runs labelled `reward_zero_variance`), 9;
`reward_zero_variance` 3, 3, 100%, 2; `loss_spike` 2, 2, 67% (info-level jumps of a
noisy DPO loss in the run labelled `nan`), 0; `overfitting`, `loss_rising`, `nan`,
`length_truncation`, `dpo_over_optimisation` 1 of 1 each.

The held-back targets (recall ≥ 90%, no warning on a healthy run, median delay ≤ 10
points) are met for healthy runs and delay, not for recall (83% over both rounds, 67% on
round 2). What the round-2 runs show:

- `opd_reverse_kl_flat` (on-policy distillation) is missed: its objective and accuracy
  are logged as `train/reverse_kl` and `train/correct_rate`, names of a hand-written loop
  that no rule reads.
- `grpo_verl_mixed_cuts_divergence` is found (entropy collapse 6 points after its onset,
  KL growth at step 32, 12 after the labelled onset, truncation 5 points after), but its
  flat reward is not: verl's `critic/score/mean` is aliased to `accuracy`, which
  `rl.no_progress` does not read, and its validation key (`…/reward/mean@4`) is not one
  of the aliased `mean@1` forms.
- `sft_token_compressor_plateau` is found by `sft.loss_not_falling` after its 30-point
  warm-up (29 points after the labelled onset, the first log).

Fixing these now would be tuning on round 2: the next change spends those runs, and a
round 3 of new logs is needed to measure it.

#### Measured in session 5 (40 runs: 28 train, 12 held back: 6 in round 1, 6 in round 3)

As printed by `runwatch health-eval` (one run, after round 3 was committed):

| split | pathologies found | healthy runs with a warning | median delay (points) |
|---|---|---|---|
| train | 15 of 17 (88%) | 0 of 11 | 5.5 |
| holdout (rounds 1 and 3) | 6 of 8 (75%) | 1 of 4 | 11 |
| holdout round 1 | 3 of 3 (100%) | 0 of 3 | 4.5 |
| holdout round 3 | 3 of 5 (60%) | 1 of 1 | 23 |
| all | 21 of 25 (84%) | 1 of 15 | 7 |

("Pathologies" counts runs by their main label; the per-class rows below count secondary
labels too.) Per class on the held-back runs (labels, found, false +, precision, median
delay in points / steps): `rl_no_progress` 3, 3, 0, 100%, 11 / 16; `kl_growth` 1, 1, 2,
33%, 23 / 23; `loss_not_falling` 1, 1, 0, 100%, 29 / 1450; `overfitting` 1, 1, 0, 100%,
0 / 0; `length_truncation` 1, 1, 0, 100%, -22 / -110; `reward_zero_variance` 2, 0;
`entropy_collapse` 1, 0; `reward_hacking` 1, 0. On `train`: every class found in every
run labelled with it except `rl_no_progress` (4 of 6: `grpo_axiomforge` and
`grpo_meta_hackathon` are missed, as before); round 2's misses are now found
(`opd_reverse_kl_flat` through the distillation KL, the verl run's flat reward through its
score).

The held-back targets are not met in session 5: recall 75% (60% on round 3, the clean
figure), one healthy run with a warning, median delay 11 points (23 on round 3). What the
round-3 runs show:

- `grpo_kl_penalty_fixed_demo` (healthy) raises `grpo.kl_ref_growing` and
  `grpo.kl_ref_spike`: its KL rises from 0 to 0.12 in its first 15 steps and then holds at
  0.12-0.23. The trend rule reads a rise of 0.1 nats within its window as growth; a KL
  that rises once and settles, as a KL penalty makes it, is not. Its capped sibling
  `grpo_reward_cap_no_signal` raises the same (the second `kl_growth` false positive).
- `grpo_reward_hacking_kl_demo`: its KL growth is found 23 points after the labelled
  onset; the reward hacking (the proxy reward saturates while eval perplexity goes from
  4.5 to 16) is not, because its eval reward rises too and no rule reads perplexity; its
  groups without reward variance (`train_reward_std` < 0.001) are not, because no rule
  reads a reward's standard deviation.
- `grpo_reward_cap_no_signal` is missed: nothing reads `train_reward_std` or a gradient
  norm of exactly 0.
- `grpo_leetcode_entropy_falling` is missed: its entropy is logged as `policy/entropy`,
  which is no trainer's name in the sources above and is not aliased.
- `grpo_drgrpo_qwen3_flat_reward` is found by `rl.no_progress` (16 points after onset, on a
  20-step run) and `sft_lrqa_chance_plateau` by `sft.loss_not_falling` after its 30-point
  warm-up (29 points after the first log).

Fixing these would be tuning on round 3; the next change spends those runs.

#### Measured in session 6 (45 runs: 34 train, 11 held back: 6 in round 1, 5 in round 4)

As printed by `runwatch health-eval` (one run, after round 4 was committed):

```
train: 20 of 22 pathologies found (91%), median delay 8 logged points; \
0 of 12 healthy runs with a warning
holdout: 3 of 3 pathologies found (100%), median delay 4.5 logged points; \
0 of 8 healthy runs with a warning
all: 23 of 25 pathologies found (92%), median delay 8 logged points; \
0 of 20 healthy runs with a warning
holdout round 1: 3 of 3 pathologies found (100%), median delay 4.5 logged points; \
0 of 3 healthy runs with a warning
holdout round 4: 0 of 0 pathologies found (—), median delay — logged points; \
0 of 5 healthy runs with a warning
```

(`train` and `all` also print "not counted: tinker_rubric_rl: run.stalled".) Per class on
the held-back runs (labels, found, false +, precision, median delay in points / steps):
`length_truncation` 1, 1, 0, 100%, -22 / -110; `overfitting` 1, 1, 0, 100%, 0 / 0;
`rl_no_progress` 2, 2, 0, 100%, 10 / 28 (all round 1). On `train`: every class found in
every run labelled with it except `rl_no_progress` (5 of 7: `grpo_axiomforge` and
`grpo_meta_hackathon` are missed, as before); false positives: `loss_spike` 1
(`dpo_soup_takehome`), `reward_zero_variance` 1 (`grpo_stats_safety_unsloth`, above),
`rl_no_progress` 2 (`grpo_deepretrieval`, `grpo_memory_redteam`). Round 3's runs, now
`train`, are all found and its healthy run raises nothing.

What the held-back figure says: round 4 is clean (labelled and committed before any
replay) and raised no warning on its 5 healthy runs; it holds no pathology, so recall and
delay on held-back runs still rest on round 1 alone, whose 6 runs have been scored in
every session and are no longer unseen. The last clean recall figure is round 3's, 3 of 5
(60%), measured before this session's changes. The targets (recall ≥ 90% and median delay
≤ 10 points on unseen pathologies) need a round of new logs with pathologies to be
measured again.

#### Changed in session 7, before round 5 is scored

The changes were made against `train` runs, the stress set and synthetic trigger / near
miss series (each in `tests/health`), with round 5 being collected blind at the same
time: `rl.no_progress` runs on the reward also when the run logged an accuracy first
(`grpo_axiomforge`: its held-out accuracy at iteration 0 took the rule, and 7 evaluations
never reach 10 points), judges 4 to 9 points strictly (`grpo_meta_hackathon`, 4 logs)
and no longer warns on a reward rising between one and two standard errors;
`loss_not_falling` ends its warm-up after 200 steps in a sparse log; `loss.spike` leaves
a spike out of the noise the next is judged against; new rules `grpo.entropy_low` and
`grpo.kl_ref_drift`; OpenRLHF's DPO margin. As printed by `runwatch health-eval` on the
rounds 1-4 corpus (a copy taken before round 5 was merged), the session 6 engine and
this one, load average 1-2 before and 14 after (the figures do not depend on load):

| split | found, before → after | healthy with a warning | median delay (points) |
|---|---|---|---|
| train | 20 of 22 (91%) → 22 of 22 (100%) | 0 of 12 → 0 of 12 | 8 → 6 |
| holdout (rounds 1 and 4) | 3 of 3 (100%) → 3 of 3 (100%) | 0 of 8 → 0 of 8 | 4.5 → 3.5 |
| holdout round 1 | 3 of 3 (100%) → 3 of 3 (100%) | 0 of 3 → 0 of 3 | 4.5 → 3.5 |
| holdout round 4 | 0 of 0 → 0 of 0 | 0 of 5 → 0 of 5 | — |

On `train` the `loss_not_falling` delay went from 29 to 19 points (`sft_lrqa_chance_plateau`,
logged every 50 steps, is found at its 10th log), `rl_no_progress` from 9 to 6; the
early verdict adds `rl_no_progress` info findings (not warnings) on two runs not
labelled with it (`grpo_tinker_codeforces_restarts`, whose reward is 0 throughout, and
`tinker_rubric_rl`, 7 noisy steps), so that class's precision fell. Rounds 1 and 4 have
been scored before and are not unseen; round 5 is the clean figure. One caveat on it:
`tests/health/test_scoring.py` replays the real corpus's held-back runs, so the health
test suite run during this session replayed round 5 once it was merged (at 16:21) through
the engine of the time; only pass or fail was read, no score or finding, and no change
was made with a round-5 run in view. Two more: the readers' commit messages named the
kinds of run they were adding (the helper tuning the rules read them and made no change
aimed at them), and importing a log runs the rules, so each reader saw the findings
*count* of their first two or three imports after writing those labels down.

#### Round 5, scored once (session 7)

20 new public logs (12 DPO, SFT and distillation runs from one reader, 8 GRPO and PPO runs
from another; 15 with a pathology, 5 healthy), labelled from reading each log, committed
(29d79b9) after this session's engine changes and scored once, as printed by
`runwatch health-eval --round 5 -o wide` at 17:02 UTC (a run counts as found when a
finding of one of its labelled classes, main or secondary, comes; the table counts
secondary labels in their own class):

```
holdout round 5: 11 of 15 pathologies found (73%), median delay 13.5 logged points;
0 of 5 healthy runs with a warning
```

| class | runs | found | false + | median delay (points) | missed |
|---|---|---|---|---|---|
| entropy_collapse | 4 | 4 | 0 | 16.5 | — |
| kl_growth | 1 | 1 | 0 | 63 | — |
| length_truncation | 1 | 0 | 0 | — | grpo_verl_math_kl_runaway (secondary) |
| loss_not_falling | 2 | 0 | 2 | — | dpo_minillm_zero_grad, sft_tiny_gpt2_chance_loss |
| loss_rising | 1 | 0 | 0 | — | distill_nmt_loss_jump |
| loss_spike | 1 | 1 | 0 | 12 | — |
| loss_zero | 1 | 0 | 0 | — | sft_llamafactory_loss_zero (no rule names this class) |
| nan | 2 | 2 | 0 | 0 | — |
| overfitting | 2 | 2 | 0 | 22 | — |
| reward_hacking | 3 | 0 | 0 | — | the 3 grpo_leetcode_* runs (found by entropy collapse) |
| reward_zero_variance | 1 | 0 | 0 | — | grpo_verl_math_kl_runaway (secondary) |
| rl_no_progress | 2 | 2 | 3 | 7.5 | — |

So on unseen logs: **recall 73% (target 90%), median delay 13.5 points (target 10), no
warning on the 5 healthy runs (target met)**. What the misses show: a proxy reward that
rises while the logged correctness reward stays at 0 is not read as hacking (the rule
wants a validation metric that falls); a DPO run whose gradient norm is exactly 0 and a
loss stuck at chance (ln of the vocabulary) are not called "not falling"; a distillation
loss that jumps 36% late after its step counter restarted is not read as rising; and a
loss pinned at exactly 0 has no rule. Session 8 tuned on these misses, so round 5 is
spent (below).

#### Changed in session 8 (round 5 spent)

Round 5's 20 runs moved to `train` (`left_holdout` says why), and the misses were fixed
from what trainers log, each change with a trigger series and a near miss in
`tests/health` (`cases.py`, `test_engine.py`):

- `loss.zero` (SFT): the loss exactly 0 on 3 logged steps in a row, class `loss_zero`.
  Not for DPO, whose loss at 0 with accuracy 1 is `dpo.loss_collapsed`, nor GRPO, whose
  loss is often exactly 0 by construction.
- `loss.stuck` (SFT): after 8 points over 50 steps, every loss so far within 0.5% of
  where it started and no fall of 0.5%: a loss with no minibatch noise at all, as a model
  at chance (ln of the vocabulary, whatever the batch) logs. A loss that is merely flat
  with noise (a frozen model still sees different batches) waits for
  `sft.loss_not_falling`'s warm-up.
- `optim.zero_gradient` (SFT, DPO; info): the gradient norm exactly 0 on 3 logged steps in
  a row. Info, since some DeepSpeed versions log 0 for a gradient they do not see.
- `loss.stepped_up` (SFT; detector `shift`): the loss jumps 20% above its level just
  before (the median of its last 3 points) and stays there 3 points (a resume from the
  wrong checkpoint, a changed data mix); a spike that comes back is `loss.spike`. A step
  that goes back refills its window with the points logged up to that step: a run
  resumed from its checkpoint logs those steps again at the loss it had there, above
  where the first attempt had got to, and that is no jump (`loss.spike`, info, still notes it).
- A loop that logs its loss only as `train_loss` (NeMo: `reduced_train_loss`; Lightning's
  CSVLogger: `train_loss_step`), its validation loss as `val_loss` (Keras, Lightning and
  NeMo too), or its mean reward as `reward/mean`, `rewards/mean` or `avg_reward`, is
  judged on them
  (`READ_WHEN_ALONE` in `runwatch.metrics.aliases`): the first key that
  feeds a metric keeps it, and such a name yields to the role's own name in a batch
  holding both, so the HF Trainer's end-of-run `train_loss` (the run's mean) never
  becomes a loss point.
- `grpo.proxy_hacking` (info): the reward rises 0.1 over 16 steps while the task score
  logged beside it (verl's score, tinker's `correct`, and, for the rules only, a TRL
  reward function whose name says accuracy or correct, such as
  `rewards/accuracy_reward/mean`) moves less than 0.02. The round-5 runs that showed it
  name their correctness reward `reward/f`, which nothing general can read: they are still
  found by their falling entropy, not as hacking.
- Earlier evidence, at info: `grpo.entropy_falling` (entropy down 25% over 32 steps and
  still falling; the collapse rule waits for a halving) and `grpo.truncation_rising`
  (the cut share up 0.05 over 32 steps and still rising; `grpo.truncation` waits for 30%
  on 8 of 10 steps). Info findings count for recall and delay but are no false alarm;
  `grpo.entropy_falling` also opens on a healthy run whose policy sharpens as it learns
  (`grpo_verl_agent_alfworld_g2po_rising`), which is what it says.
- Two leftovers: a k-of-n finding's count ("8 of the last 10") is the most its window held
  while the finding was open, also when a whole file is read in one batch (it was the
  count at the batch's end, often 0 for a finding long resolved); and `grpo.entropy_low`,
  once held, is released only when the entropy is back above half of its start, so an
  entropy hovering at a quarter of it is one finding, not one per judgement.
- Slow rules no longer repeat fast ones' warnings in a listing: rules that judge one
  signal at different speeds (`Rule.signal`: an entropy falling, collapsing, fallen to a
  quarter; a KL growing or drifting; truncation rising, sustained, extreme; a loss not
  falling or stuck; a loss rising or stepped up) and whose findings overlap in steps are
  listed as one finding, led by the most severe, as events at one step are. The findings
  table keeps each, so the score and the history are unchanged.
- `health-eval --round N --split train` says a round is held back instead of scoring the
  held-back round; `labels.yaml`'s `scored_rounds` lists the rounds already scored, and
  `tests/health/test_scoring.py` replays only those, so a new round keeps its one clean
  score.

As printed by `runwatch health-eval --split train` (65-run corpus, 54 in `train` with round 5,
the engine before and after these changes, 19:13 and 19:51 UTC; load average 2-10, which
the figures do not depend on):

```
before: train: 33 of 37 pathologies found (89%), median delay 7 logged points;
        0 of 17 healthy runs with a warning
after:  train: 37 of 37 pathologies found (100%), median delay 6.5 logged points;
        0 of 17 healthy runs with a warning
```

Per class, before → after:

| class | runs | found | false + | median delay (points) |
|---|---|---|---|---|
| entropy_collapse | 6 | 6 → 6 | 0 → 1 | 16.5 → 8.5 |
| length_truncation | 3 | 2 → 3 | 0 → 0 | 2.5 → 0 |
| loss_not_falling | 4 | 2 → 4 | 2 → 3 | 19 → 8 |
| loss_rising | 2 | 1 → 2 | 0 → 0 | 8 → 5 |
| loss_spike | 3 | 3 → 3 | 1 → 2 | 0 → 0 |
| loss_zero | 1 | 0 → 1 | 0 → 0 | — → 2 |
| reward_hacking | 4 | 1 → 1 | 0 → 0 | 10 → 10 |
| reward_zero_variance | 6 | 5 → 5 | 1 → 1 | 2 → 2 |
| kl_growth | 3 | 3 → 3 | 0 → 0 | 31 → 31 |
| rl_no_progress | 9 | 9 → 9 | 7 → 10 | 6 → 6 |

(`dpo_over_optimisation`, `nan` and `overfitting` are unchanged.) The new false positives
are on runs labelled with another pathology: `distill_nmt_loss_jump` (its loss, once
jumped, has not fallen since the start: `loss_not_falling`; its jump read as a spike the
point it came: `loss_spike`), three `grpo_leetcode_*` runs whose `reward/mean`, now read,
sat flat for its first 13-16 steps before the proxy reward climbed (the early
`rl.no_progress` verdict, info), and the
healthy g2po run's info finding above. The
`train` figure is tuned on and says only that the fixes hold; the next clean figure is the
next held-back round's.

Not changed: the KL of `grpo_verl_math_kl_runaway` (0.0004 to 0.098 over 50 steps) grows
as the KL of the healthy `grpo_verl_agent_alfworld_*` runs does over their first 40 steps,
so it is still found only when it climbs 0.1 nats within 64 steps (63 points late);
`sft.overfitting` still needs its validations to trend (34 points late on
`sft_centaur70b_overfitting`, evaluated every 10 steps).

#### Round 6, scored once (session 8)

29 new public logs from repositories new to the corpus (22 with a pathology, 7 healthy),
found by four readers who neither read the engine's source nor ran it nor saw an import's
output, each labelled from reading its log; the labels were committed (9f6a060) after the
session 8 changes above and scored once, as printed by `runwatch health-eval --round 6`
at 20:15 UTC:

```
holdout round 6: 10 of 22 pathologies found (45%), median delay 2.5 logged points;
0 of 7 healthy runs with a warning
```

| class | runs | found | false + | median delay (points) | missed |
|---|---|---|---|---|---|
| entropy_collapse | 1 | 0 | 1 | — | ppo_flappybird_sb3_csv |
| kl_growth | 3 | 0 | 0 | — | all 3 (below) |
| length_truncation | 1 | 1 | 0 | 0 | — |
| loss_not_falling | 3 | 1 | 2 | 2 | sft_korean_lora_json, sft_tech_challenge_two_epochs |
| loss_rising | 0 | 0 | 1 | — | — |
| loss_spike | 3 | 0 | 0 | — | all 3 (below) |
| loss_zero | 2 | 2 | 0 | 2 | — |
| nan | 1 | 1 | 0 | 0 | — |
| overfitting | 5 | 1 | 0 | 7 | 4 (below) |
| reward_hacking | 1 | 0 | 0 | — | grpo_proxy_rm_qwen05b |
| reward_zero_variance | 3 | 2 | 0 | 3.5 | grpo_autoresearch_tiny_math |
| rl_no_progress | 4 | 4 | 2 | 5.5 | — |

Missed `kl_growth`: `grpo_flux_judge_reward`, `grpo_proxy_rm_qwen05b` (secondary),
`grpo_yuxuan_arrays_csv`. Missed `loss_spike`: `grpo_rookworld_mini_chess`,
`grpo_tinker_code_sandbox` (secondary), `sft_bloom3b_lyrics_lora`. Missed `overfitting`:
`dpo_ait_a5_csv`, `other_six_evalset_finetune`, `sft_llamafactory_llama3_lora_eval`,
`sft_tom_qlora_csv`.

So on logs the rules had never seen: **recall 45% (target 90%)**, **median delay 2.5
points** (target 10, met by what is found) and **no warning on the 7 healthy runs** (target
met). Five runs were marked doubtful by their own readers before the score (a KL that
looks like a broken estimate, a classic-control PPO policy sharpening as it learns, two
borderline plateaus, a DPO eval loss rising while the train loss is flat); none of them
was found, so without them the recall is 10 of 17 (59%). Round 5 (73%) came largely from
repositories the train set already held; round 6's are all new, and it says the rules
generalise worse than the train figure suggests. What the misses show: validation losses
under other names (`eval_g0_loss`, a LLaMA-Factory `eval_loss` that rises 2% from its
minimum, a CSV whose only rise is the last evaluation) are not read or not yet a trend;
GRPO loss spikes of 100x that come back at once are not found as spikes; a 60-step
excursion of an SFT loss reads as rising and not falling instead of a spike; a proxy
reward model's rise against a flat `gold_acc` is not read as hacking; KL logged under
names outside the trainers' vocabularies, or rising by spikes, is not read as growth.

#### Changed in session 8, after round 6 was scored (round 6 spent)

Round 6's 29 runs moved to `train` (`left_holdout` says why; `scored_rounds` is back to
rounds 1 and 4). Its misses were fixed from trainers' conventions, each change with a
trigger series and a near miss in `tests/health` (`cases.py`, `test_engine.py`):

- `val.loss_above_best` (SFT, DPO; info, class `overfitting`; detector `above_best`): after
  3 validations, the validation loss lies 1% above its best so far on 2 validations in a
  row, or 5% above it on one. The first sign of overfitting, before `sft.overfitting`'s
  trend over 6 validations shows it; info, since a small validation set can wander that
  far. It shares `sft.overfitting`'s signal (`val_up`), so the two are listed as one.
- The HF Trainer's per-set validation loss `eval_<set>_loss` (an `eval_dataset` given as a
  dict) is the validation loss where the run logs no `eval_loss`; a score named `gold_*`
  (`gold_acc`, `gold_reward`: the true objective a proxy or learned reward stands in for,
  as reward-model studies name it) is the task score `grpo.proxy_hacking` reads, where the
  run logs no other; a GRPO loop's `kl_avg` or `mean_kl` is its KL to the reference
  (`ALONE_PATTERNS` and `READ_WHEN_ALONE` in `runwatch.metrics.aliases`; the rules only).
- `grpo.loss_spike` (GRPO, PPO; info, class `loss_spike`): the policy loss jumps away from
  the point before it, up or down (a policy loss's sign means nothing; detector `jump` with
  `both`), by 20 robust standard deviations of its recent changes and by at least its own
  level. A GRPO loss sits near 0 with noise of its own, so `loss.spike`'s 6 deviations
  would flag its tails.
- Stable-Baselines3's `train/entropy_loss` (minus a discrete policy's entropy) is read by
  its size as the entropy, where the run logs no other (`ALONE_TRANSFORMED`): OpenRLHF's
  W&B history logs the entropy itself under the same name, and the size is the entropy in
  both.
- `grpo.kl_ref_high` (info, class `kl_growth`): the KL to the reference above 1 nat on 5
  of the last 8 logged steps. A KL that climbs by spikes (no trend follows it) or jumps in
  the first steps of a short run is far from the reference however it got there; a policy
  held by its penalty stays at hundredths to tenths of a nat.

As printed by `runwatch health-eval --split train` (94-run corpus, 83 in `train` with round
6, the engine before and after these changes, 20:18 and 20:33 UTC; load average 2-5):

```
before: train: 47 of 59 pathologies found (80%), median delay 5.5 logged points;
        0 of 24 healthy runs with a warning
after:  train: 55 of 59 pathologies found (93%), median delay 5 logged points;
        0 of 24 healthy runs with a warning
```

Per class, before → after (the others unchanged):

| class | runs | found | false + | median delay (points) |
|---|---|---|---|---|
| entropy_collapse | 7 | 6 → 7 | 2 → 2 | 8.5 → 9 |
| kl_growth | 6 | 3 → 5 | 0 → 0 | 31 → 31 |
| loss_spike | 6 | 3 → 4 | 2 → 4 | 0 → 0 |
| overfitting | 8 | 4 → 8 | 0 → 1 | 8.5 → 3.5 |
| reward_hacking | 5 | 1 → 2 | 0 → 0 | 10 → 7.5 |

The new false positives are info findings on runs labelled with another pathology. Still
missed: the two SFT plateaus their reader doubted
(`sft_korean_lora_json`, `sft_tech_challenge_two_epochs`: a 2% fall that the 5% rule does
not call flat), `sft_bloom3b_lyrics_lora` (a 60-step excursion that climbs over several
points, not one jump; found as `loss.rising`), the downward spike of
`grpo_tinker_code_sandbox`'s summed loss (tinker's `loss:sum`, which no rule reads: a
sum over a batch's tokens is not a loss level an SFT rule could judge), the slow KL of
`grpo_proxy_rm_qwen05b`, and `grpo_yuxuan_arrays_csv`'s KL is found 110 points late. The
`train` figure is tuned on and says only that the fixes hold; the next clean figure is
round 7's.

#### Round 7, scored once (session 8)

9 new public logs from repositories new to the corpus (5 with a pathology, 4 healthy),
collected by three more readers the same way as round 6 while the changes above were made,
labelled from reading each log and committed (d0c261f) before being scored once, as
printed by `runwatch health-eval --round 7` at 20:36 UTC:

```
holdout round 7: 3 of 5 pathologies found (60%), median delay 3 logged points;
0 of 4 healthy runs with a warning
```

| class | runs | found | false + | median delay (points) | missed |
|---|---|---|---|---|---|
| loss_not_falling | 1 | 0 | 0 | — | sft_poetry_lora_50steps |
| loss_spike | 0 | 0 | 1 | — | — |
| nan | 1 | 1 | 0 | 1 | — |
| reward_zero_variance | 3 | 0 | 0 | — | all 3 (2 found by their secondary label) |
| rl_no_progress | 3 | 3 | 0 | 3 | — |

Found: `grpo_axiom_mgrpo_checkpoint` and `grpo_legaloom_fn_reward` (by their secondary
`rl_no_progress`, and the latter's NaN), `ppo_rlvr_blackjack_log`. Missed: a 50-step SFT
loss that falls 1.7% over the run (`sft_poetry_lora_50steps`) and a log of group
availability with no reward key (`grpo_rho_gsm8k_groups`, which its reader doubted,
with `ppo_rlvr_blackjack_log`; without those two the recall is 2 of 3). No group-variance
rule fired on the two GRPO runs whose groups had no spread, though each was found.

So the held-back figures after this session: **round 6 (29 runs, scored before its fixes)
45%**, **round 7 (9 runs, after them) 60%**, median delay 2.5 and 3 points, no warning on
11 healthy runs. The recall target (90%) is not met; round 7 is too small to say more than
that the engine still misses what it was not shown. The readers' search ran out during
round 7, so the held-back share is 20 of 103 runs (rounds 1, 4 and 7), below the third
the issue asks for until a new round is added.

## Rules
"""


DETECTOR_DOCS = (
    ("threshold", "a value is above/below a limit on *k* of the last *n* points (optionally "
     "after `min_points`); a budget rule's limit is a fraction of a run setting such as "
     "`max_sample_tokens`"),
    ("spike", "a value exceeds `factor` × the rolling median of the previous `window` points "
     "(the median taken as at least `min_median`; or falls below `drop` × it); the finding "
     "stays open `hold` points"),
    ("trend", "the Theil–Sen slope over the last `window` points (on 8 bucket medians) moves "
     "the series by at least `min_effect` (`relative`: as a fraction of its level) `up` or "
     "`down`, or by less than it (`flat`); a holding trend is released only when the effect "
     "clearly leaves it; with `recent_z`, it holds only while the latest half of the window "
     "still moves that way by a quarter of `min_effect` and by `recent_z` widths of the "
     "series' point-to-point noise (a series that rose once and settled has stopped)"),
    ("no_progress", "after `warmup` points (or `warmup_steps` steps and `min_points` "
     "points), the latest bucket median has not moved `min_change` (relative) from the "
     "first; with `max_spread`, only while every point so far lies within that fraction of "
     "the start (no noise at all); with `moved` (a fall that is the finding) it holds the "
     "other way, and once held is released only when two thirds of the fall are gone"),
    ("no_improvement", "after `min_points`, the median of the latest *k* points (*k* = half "
     "the points so far, at most `head`) has not gained on the median of the first *k* by "
     "more than `z` standard errors, the noise being the robust spread of the series' "
     "point-to-point changes; from `early_points` until `min_points`, has not gained at "
     "all"),
    ("jump", "a value rises above the one before it by more than `z` robust standard "
     "deviations of the recent step-to-step changes and by `min_rel` of its level (with "
     "`both`, or falls as far below it); with "
     "`repeat`, a finding holding that many jumps (within `hold` points of each other) is "
     "a warning"),
    ("shift", "the last `stay` points all lie above the level just before them (the "
     "median of the last 3 of the `window` points before) by `min_rel` of it and by `z` "
     "robust standard deviations of those points' step-to-step changes (a jump that did "
     "not come back); it holds while the series stays above the old level by half of "
     "`min_rel`"),
    ("above_best", "after `min_points` points, the last `k` points in a row lie above the "
     "series' best so far (its running minimum) by `min_rel` of it, or one point by "
     "`single`; it holds while the series stays above the best by half of `min_rel`"),
    ("divergence", "one series trends one way while another trends a given way over the "
     "same steps (e.g. training up, validation down; validation loss up while validation "
     "reward does not fall)"),
    ("nonfinite", "any metric is NaN, +Infinity or -Infinity"),
    ("stall", "a running run logs nothing for `factor` × its usual step interval, and at "
     "least `min_seconds`"),
)


def _methods(rule: Rule) -> str:
    return "all" if rule.methods == ALL_METHODS else ", ".join(rule.methods)


def _params(rule: Rule) -> str:
    if not rule.params:
        return "—"
    return ", ".join(f"`{k}={v}`" for k, v in rule.params.items())


def render() -> str:
    table = ["| detector | fires when |", "|---|---|"]
    table += [f"| `{name}` | {text} |" for name, text in DETECTOR_DOCS]
    classes = ["| rule | class |", "|---|---|"]
    classes += [f"| `{rule}` | `{cls}` |" for rule, cls in RULE_CLASSES.items()]
    out = [INTRO.replace("{detectors}", "\n".join(table))
           .replace("{classes}", "\n".join(classes))]
    for rule in CATALOGUE:
        metrics = "any metric" if rule.metrics == ("*",) else ", ".join(
            f"`{m}`" for m in rule.metrics)
        condition = rule.condition.format(**{k: v for k, v in rule.params.items()})
        out.append(f"### `{rule.id}` — {rule.title}\n")
        out.append(f"- **Methods:** {_methods(rule)}")
        out.append(f"- **Reads:** {metrics}")
        out.append(f"- **Detector:** `{rule.detector}`; parameters: {_params(rule)}"
                   + (f"; budget: `{rule.budget}`" if rule.budget else ""))
        out.append(f"- **Condition:** {condition}")
        out.append(f"- **Severity:** {rule.severity}")
        out.append(f"- **Advice:** {rule.advice}\n")
    out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    return write_generated(render, "docs/health.md", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

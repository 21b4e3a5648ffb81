"""docs/health.md's third part: what each session measured on the corpus and changed, round
by round (the record the protocol asks for; new rounds are added at its end)."""

HISTORY = """#### Measured in session 4 (34 runs: 21 train, 13 held back of which 7 in round 2)

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

#### Changed in session 9 (round 7 spent)

Round 7's 9 runs moved to `train` (`left_holdout` says why; `scored_rounds` is back to
rounds 1 and 4). The blind rounds found 73%, 45% and 60% while `train` stood near 95%, so
the misses of rounds 5 to 7 were read for what they have in common, and each class was
fixed from trainers' conventions and synthetic series (a trigger and a near miss each in
`tests/health`), not from the shape of one log:

- **SFT plateaus that fall about 2%** (`sft_poetry_lora_50steps`, `sft_korean_lora_json`,
  `sft_tech_challenge_two_epochs`): new `sft.plateau` (warning, class `loss_not_falling`,
  detector `flat_since`). What separates them from healthy slow runs is not the training
  loss alone (a healthy LoRA's loss also flattens after its first drop) but both losses
  together *since the first validation*: from the third validation on, the validation
  loss has fallen less than 4% since its first value and the training loss logged since
  that step (8 points or more) less than 4% too. On every healthy run of the corpus with a
  validation loss, the larger of the two falls is 6% or more at every validation (the
  closest: 6.0% and 8.2%); on the three plateaus it is 1.4% to 2.9%. A run that learned
  before its first validation and converged later has fallen since; the verdict needs no
  warm-up.
- **Groups with no spread, shown only by a reward's statistics** (`grpo_legaloom_fn_reward`,
  `grpo_axiom_mgrpo_checkpoint`, `grpo_autoresearch_tiny_math`): `grpo.no_signal` (no
  group with a spread) now holds on 4 of the last 10 steps, not 3 in a row, and
  `grpo.reward_std_zero` on 4 of 10, not 3 of 5: four steps in ten learning nothing is
  the finding, however the steps between went (a TRL log's `frac_reward_zero_std` of 1.0
  between steps of 0.5). Not 3 of 10: a run of one prompt per step that solves 90% of
  its prompts already has every sample right on 4 steps in 10, and its data is
  saturated; one at 80% has it on 2. New `grpo.reward_pinned` (warning, detector `pinned`): the mean
  reward exactly at the lowest value it has taken, and took before, on 3 of the last 5
  steps; a batch's mean returns to exactly its floor only when every sample scores it. A
  new low (a falling reward) or a value repeated above the floor (a mean of eight 0/1
  rewards takes nine values; a rising one repeats its best) is no hit; no healthy run
  of the corpus has more than 2 such steps in 5.
- **Names no vocabulary knows, read by role** (`runwatch.metrics.aliases.role_by_words`):
  an unknown key whose words name a loss, a mean reward, the reward's spread, an
  entropy, a KL or a share of groups with no spread (`zero_std`, `degenerate`,
  `advantage_collapse` beside `frac`, `ratio`, `rate` or `share`) feeds that role, after
  every known name in the batch, so a trainer's own name keeps its role. Words that make
  a name something else keep it unread: a coefficient, a bound, a count, a time, a
  best-of-N, a per-epoch mean, a held-out set (an environment's return has no known
  scale, and the validation rules judge absolute falls), a value or auxiliary loss, a
  policy-to-sampler KL (`approx_kl`). So `kl_div`, `loss_kl`, `mean_entropy`,
  `train_reward`, `std_reward`, `mixed_cuts/advantage_collapse_rate` and tinker's
  summed `loss:sum` (read by `grpo.loss_spike`, which judges a jump against the loss's
  own noise and level, so a sum's scale does not matter) are read;
  `grpo_verl_math_kl_runaway`'s groups with no spread and `grpo_tinker_code_sandbox`'s
  loss spike are found.
- **Long loss excursions** (`sft_bloom3b_lyrics_lora`): new `loss.excursion` (info,
  class `loss_spike`, detector `excursion`): the median of the last 3 points rose 50%
  and 3 robust standard deviations above the level of the 20 points before, stayed 5
  points or more, and came back within 20% of it. It is found when it ends (113 points
  after its onset on that run): while it lasts a reader cannot tell it from a loss that
  rises for good, which `loss.rising` reports.
- **Slow KL growth** (`grpo_proxy_rm_qwen05b`, 0.0025 to 0.068 nats over 490 steps): new
  `grpo.kl_ref_creep` (info, class `kl_growth`): over a full window of 256 steps the KL
  rises by half its level or more and still rises over the latest half. A KL held by
  its penalty rises in its first tens of steps and then settles: the healthy runs of the
  corpus either never fill the window or have settled in its latest half.

Not changed: `grpo_rho_gsm8k_groups` logs how many rollouts had no spread as a count
(`n_degenerate` of 4) and the share that had one as `availability`; neither is a name a
role can be read from, so it is still missed. The three `grpo_leetcode_*` runs still have
no `reward_hacking` finding: their correctness reward is named `reward/f`.

As printed by `runwatch health-eval --split train` (103-run corpus, 92 in `train` with
round 7; the engine before these changes at 22:04 UTC and after them at 22:59 UTC, load
average 4-12, which the figures do not depend on):

```
before: train: 58 of 64 pathologies found (91%), median delay 5 logged points;
        0 of 28 healthy runs with a warning
after:  train: 63 of 64 pathologies found (98%), median delay 5 logged points;
        0 of 28 healthy runs with a warning
```

Per class, before → after (the others unchanged):

| class | runs | found | false + | median delay (points) |
|---|---|---|---|---|
| kl_growth | 6 | 5 → 6 | 0 → 0 | 31 → 27 |
| loss_not_falling | 8 | 5 → 8 | 5 → 6 | 7 → 7 |
| loss_spike | 6 | 4 → 6 | 5 → 5 | 0 → 0 |
| reward_zero_variance | 12 | 7 → 11 | 1 → 1 | 2 → 5 |
| rl_no_progress | 16 | 16 → 16 | 12 → 17 | 6 → 6 |

The new false positives are findings on runs labelled with another pathology or info
findings: `sft.plateau` on `sft_qwen_lora_overfitting` (its first validations are flat
before it overfits), and `rl.no_progress`'s early verdict (info, from 4 points) on five
runs whose reward is now read by its name's words (`train_reward`, `ep_rew_mean`,
`rewards_avg`), two of them healthy; none is a warning. The held-back
rounds 1 and 4 score as before (3 of 3 found, 0 of 8 healthy runs with a warning). The
`train` figure is tuned on and says only that the fixes hold; the next clean figure is
round 8's.

#### Round 8, scored once (session 9)

54 new public logs from repositories new to the corpus (37 with a pathology, 17 healthy),
collected by seven readers the same way as rounds 6 and 7 while the changes above were
made, labelled from reading each log and committed (beba127) before being scored once, as
printed by `runwatch health-eval --round 8` at 23:11 UTC:

```
holdout round 8: 21 of 37 pathologies found (57%), median delay 3 logged points;
2 of 17 healthy runs with a warning
```

37 runs were marked doubtful by their own reader before the score (`doubtful:` in
labels.yaml says why: a few points, the first steps of a longer run, a model that is not a
language model, a reading another reader could make differently); 14 files were rebuilt
from what a trainer printed. The same score read over the 17 runs no reader doubted:
**8 of 10 found (80%), median delay 3, 2 of 7 healthy runs with a warning.**

| class | runs | found | false + | median delay (points) | missed |
|---|---|---|---|---|---|
| dpo_over_optimisation | 1 | 1 | 1 | 1 | — |
| entropy_collapse | 2 | 1 | 0 | 2 | grpo_vl3b_aokvqa_mdi_console |
| kl_growth | 2 | 0 | 2 | — | dpo_gemma2b_kithara_gpu_ref, grpo_rank_gpt2_chrf |
| length_truncation | 3 | 2 | 0 | 0 | grpo_cdia_lr_sweep_arm |
| loss_not_falling | 10 | 3 | 2 | 29 | seven, six of them doubted |
| loss_spike | 4 | 0 | 3 | — | all four, all doubted |
| loss_zero | 1 | 1 | 0 | 2 | — |
| nan | 3 | 3 | 0 | 0 | — |
| overfitting | 5 | 3 | 0 | 4 | other_wake2vec_tinyllama_embed_table, sft_unsloth_qa_six_epochs |
| reward_hacking | 2 | 0 | 0 | — | dpo_mt_chrf_five_epochs, grpo_sqli_agent_epochs |
| reward_zero_variance | 3 | 3 | 2 | 3 | — |
| rl_no_progress | 8 | 7 | 5 | 3 | grpo_rank_gpt2_chrf |

Two healthy runs got a warning, both runs no reader doubted: `dpo_qwen_math15b_loop_log`
(`dpo.loss_not_falling`) and `grpo_unsloth_gsm8k_250steps` (`grpo.kl_ref_spike`,
`grpo.reward_std_zero`, `optim.grad_norm_spike`). They are the round's most useful
result: the first warnings on held-back healthy runs since round 3, from rules that
`train`'s 28 healthy runs never trip.

The whole corpus after the round, as printed by `runwatch health-eval --split all`:

```
train: 63 of 64 pathologies found (98%), median delay 5 logged points;
0 of 28 healthy runs with a warning
holdout: 24 of 40 pathologies found (60%), median delay 3 logged points;
2 of 25 healthy runs with a warning
all: 87 of 104 pathologies found (84%), median delay 4 logged points;
2 of 53 healthy runs with a warning
```

So the held-back figures after this session: round 8 (54 runs, the largest clean round)
**57%, 80% over the runs no reader doubted**, median delay 3 points, and 2 of 17 healthy
runs warned. The recall target (90%) and the no-warning target are not met; the delay
target (10 points) is. The held-back share is 65 of 157 runs (rounds 1, 4 and 8).

#### Changed in session 10 (round 8 spent)

Round 8's 54 runs moved to `train` (`left_holdout` says why; `scored_rounds` is back to
rounds 1 and 4), so 11 of 157 runs are held back until round 9, being collected blind now,
is added. `tests/health/test_scoring.py` replays the held-back runs one test per run, so
the test workers share them (the 65 replays took 123 s in one test).

Round 8's two false alarms were read for what makes a healthy run look so, and fixed by
class (a trigger series and a near miss each in `tests/health/test_learning.py`):

- **A run that learns** (`grpo_unsloth_gsm8k_250steps`: its reward climbs 0.2 to 1.6;
  `dpo_qwen_math15b_loop_log`: its margin stands at 0.06 from the first logs): a rule
  about the run's learning signal names the metric that shows it learning
  (`Rule.learning`; see "Judging with few points and a warm-up"), and its finding is info
  while that metric has risen beyond its noise (the reward) or stands above its chance
  level (a DPO margin above 0): `grpo.reward_std_zero`, `grpo.no_signal`,
  `grpo.zero_variance` on the reward, `dpo.loss_not_falling` on the margin. A DPO loop's
  `margin` is read as the margin.
- **One prompt a step**: `grpo.reward_std_zero` needs most steps (6 of 10), not 4: a
  step's spread is 0 only when all its groups have none, and with one group a step (the
  Unsloth notebooks' setting) the share of such steps is the share of groups; 4 in 10
  is 40% of groups, not most. The runs labelled with groups alike are found as before
  (14 of 15; those with TRL's `frac_reward_zero_std` through `grpo.no_signal`).
- **Isolated spikes** of the gradient norm (`optim.grad_norm_spike`) and of the KL to the
  reference (`grpo.kl_ref_spike`) are info; a second within 5 points is the warning, as
  for loss spikes. Their severity counted toward no class.

And round 8's misses, by class, where a reader did not doubt them or the class is
general:

- **A DPO loss pinned at ln 2** (`dpo_lgcontest_lora_r32`: 0.6895-0.6937 over 180 steps,
  too short for the 200-step warm-up): `loss.stuck` judges DPO runs too. While the policy
  is the reference every margin is 0 and the loss is ln 2 on any batch; a loss with no
  batch noise there has not moved. No healthy DPO run of the corpus stays within 0.5% of
  its start for 8 points over 50 steps.
- **An entropy collapse in a few points** (`grpo_vl3b_aokvqa_mdi_console`: 1.03, 0.11,
  0.0085 in a console log of 3 steps): new `grpo.entropy_crash` (warning, class
  `entropy_collapse`): the entropy a tenth of its first logged value or less, from 3
  points on; `grpo.entropy_low` needs 4 points and a median. No entropy of a run not
  labelled with a collapse falls under 46% of its first value in the corpus.
- **Names**: the HF Trainer's notebook table (`Training Loss`, `Validation Loss`, which
  authors paste: `other_wake2vec_tinyllama_embed_table`) and a share of completions cut
  at the limit named by its words (`truncated_completions_ratio`, `truncation_rate`;
  `grpo_cdia_lr_sweep_arm`), beside TRL's `completions/clipped_ratio`.

Two labels were wrong by the log's numbers against the corpus's definition of
`loss_not_falling` (a loss within a few percent of where it started over the whole
window) and are now `healthy` (`relabelled` says why; both readers had doubted them):
`sft_metamath_one_epoch` falls 40% (1.04 at step 1 to 0.62 over its last 42 steps) and
`sft_unsloth_creative_60steps` 12% (2.29 over its first 5 steps to 2.01 over its last
10), each in its first steps and then flat, which the readers measured from.

Not changed (doubted by their readers, or no general reading): SFT and DPO plateaus whose
loss falls 2-11% or is noisy (`sft_r_programming_llama_8ep`, `dpo_cleancode_qwen7b_lora`,
`dpo_ocean_qwen7b_lf_console`, `orpo_yuholens_14b_v3`); loss spikes in 5 to 10 points
(`sft_fedmed_llm_rounds`, `sft_phi2_lora_five_epochs`, `dpo_gemma2b_kithara_gpu_ref`) and
a 0.02 excursion of a loss near 0 (`sft_geollm_ptuning_130ep`); held-out scores under the
project's own names (`grpo_sqli_agent_epochs`' DCS, `grpo_rank_gpt2_chrf`'s and
`dpo_mt_chrf_five_epochs`' chrF), which no rule can know to be quality; the slow KL of
`grpo_rank_gpt2_chrf` (0.03 nats in 80 steps); a 0.4% rise of an eval loss
(`sft_unsloth_qa_six_epochs`).

As printed by `runwatch health-eval --split train` (157-run corpus, 146 in `train` with
round 8; the engine and labels before these changes at 01:13 UTC, after them at 01:47 UTC,
load average 5-10, which the figures do not depend on; the two runs relabelled `healthy`
were misses, so with the old labels the figure after is 86 of 101):

```
before: train: 84 of 101 pathologies found (83%), median delay 4 logged points;
        2 of 45 healthy runs with a warning
after:  train: 86 of 99 pathologies found (87%), median delay 4 logged points;
        0 of 47 healthy runs with a warning
```

Per class, before → after (the others unchanged):

| class | runs | found | false + | median delay (points) |
|---|---|---|---|---|
| entropy_collapse | 9 | 8 → 9 | 2 → 2 | 8.5 → 8 |
| length_truncation | 7 | 6 → 7 | 0 → 0 | 0 → 0 |
| loss_not_falling | 18 → 16 | 11 → 12 | 8 → 8 | 7 → 7 |
| overfitting | 13 | 11 → 12 | 1 → 1 | 4 → 3.5 |

The `train` figure is tuned on and says only that the fixes hold; the next clean figure
is round 9's.

#### Round 9, scored once (session 10)

39 new public logs from repositories new to the corpus (27 with a pathology, 12 healthy),
collected by five readers the same way as rounds 6-8 while the changes above were made,
labelled from reading each log and committed (0eb5743) before being scored once, as
printed by `runwatch health-eval --round 9` at 02:08 UTC (three more staged runs, of
models that are not language models, were left out before the score):

```
holdout round 9: 20 of 27 pathologies found (74%), median delay 4 logged points;
0 of 12 healthy runs with a warning
```

32 runs were marked doubtful by their own reader before the score (a few points, a window
of a longer run, a reading another reader could make differently); about 20 files were
rebuilt or trimmed from what a trainer printed. The same score read over the 7 runs no
reader doubted: **4 of 4 found, 0 of 3 healthy runs with a warning.** Every run missed
is one its reader doubted.

| class | runs | found | false + | median delay (points) | missed |
|---|---|---|---|---|---|
| dpo_over_optimisation | 2 | 1 | 0 | 5 | dpo_tiny18m_vet_three_logs (3 points) |
| kl_growth | 2 | 0 | 1 | — | dpo_gemma2_2b_fifty_epochs_console, grpo_tikz_geometry_resumed |
| length_truncation | 1 | 1 | 0 | 0 | — |
| loss_not_falling | 8 | 6 | 4 | 10.5 | sft_llama_metrics_list_470steps, sft_lora_llama3_5ep_30log |
| loss_rising | 1 | 1 | 1 | 6 | — |
| loss_spike | 4 | 3 | 1 | 0 | grpo_tsc_extend_decision_docker |
| loss_zero | 1 | 0 | 0 | — | other_bert_clm_wikitext_console |
| nan | 3 | 3 | 2 | 0 | — |
| overfitting | 7 | 7 | 0 | 4 | — |
| reward_hacking | 1 | 0 | 0 | — | dpo_gemma2_2b_fifty_epochs_console |
| reward_zero_variance | 1 | 1 | 0 | -89 | — |
| rl_no_progress | 1 | 0 | 4 | — | grpo_cba_case_alignment_36steps |

A false positive here is a finding of that class on a run labelled with another pathology
(no healthy run got a warning). A negative delay is a finding before the step its reader
named as the onset.

The whole corpus after the round, as printed by `runwatch health-eval --split all`:

```
train: 86 of 99 pathologies found (87%), median delay 4 logged points;
0 of 47 healthy runs with a warning
holdout: 23 of 30 pathologies found (77%), median delay 4 logged points;
0 of 20 healthy runs with a warning
all: 109 of 129 pathologies found (84%), median delay 4 logged points;
0 of 67 healthy runs with a warning
```

So the held-back figures after this session: round 9 **74%, 4 of 4 over the runs no
reader doubted**, median delay 4 points, and **no warning on any of its 12 healthy runs**
(round 8 warned on 2 of 17). The no-warning and delay targets are met on the held-back
part (0 of 20 healthy runs, median 4 points); the recall target (90%) is not (77% over
rounds 1, 4 and 9). The held-back share is 50 of 196 runs (rounds 1, 4 and 9), under a
third until the next round is added.

#### Changed in session 11 (on train; round 10 collected blind)

Rounds 1, 4 and 9 stay held back (50 of 196 runs): nothing below was read, run or scored on
them. Each change was made for a class of pathology that `train` showed invisible, with a
trigger series and a near miss in `tests/health/test_train_classes.py` and
`tests/health/cases.py`:

- **A preference never learned** (`loss_not_falling`; `orpo_yuholens_14b_v3`: the margin
  -0.021 to -0.016 and the preference accuracy 0.0 at all 10 logs, while the ORPO loss,
  which adds an NLL term, falls 7.5%): new `dpo.train_margin_not_positive` (warning), the
  training margin at or below 0 on 8 of the last 10 logged steps. A margin at or below 0
  is a preference loss at or above ln 2, where every pair starts, whatever else the loss
  adds; the most a healthy DPO run of `train` has is 5 of 10 (`dpo_qwen_math15b_loop_log`,
  8 pairs a batch). The validation margin had its rule; the training margin had none.
- **A loss spike in a few points** (`loss_spike`; `dpo_gemma2b_kithara_gpu_ref`, 10 steps
  of one pair each: 1.34, 4.89, 0.001, 0.0, 16.4): `loss.spike` measures a jump against
  the noise of 10 points of history, so a short or sparsely logged run has none. New
  `loss.above_max` (info; a warning when two come within 5 points; SFT and DPO): the loss
  above twice the highest value it logged before, from its 4th point. No healthy run of
  `train` comes back above 1.13× its highest earlier loss (the most of a run labelled
  otherwise: 1.50×, `dpo_soup_takehome`); `dpo_beta_dpo_loss_spikes` is found by it at its
  first spike too (step 7, 2.8× its 0.35).
- **The learning gate, once per run**: `grpo.zero_variance`, `grpo.no_signal` and
  `grpo.reward_std_zero` each kept their own copy of the gate on `reward_mean` (three
  copies of the same work and state on every batch). The engine now keeps one gate per
  learning metric and level, fed once per batch from the run's first point and saved once
  in its state (`STATE_VERSION` 4: saved states are rebuilt); a rule whose metric a run
  logs only later judges the reward since the start, as when the run is read at once.

- **A count that contradicted its rule**: a finding of k hits in a row, read one logged
  point a batch as a live run is, said "loss was exactly 0 on 1 logged steps from step 20"
  (it starts at the first of the k hits, and counted only from the point that opened it);
  it now holds the hits before that point in its window too ("on 3 logged steps").

Not changed (no general reading, or doubted by their readers): SFT and DPO plateaus whose
loss falls 2-13% (`sft_r_programming_llama_8ep`, `dpo_cleancode_qwen7b_lora`,
`dpo_ocean_qwen7b_lf_console`: a preference accuracy near chance is a healthy 8-pair run's
too in its first 240 steps); loss spikes in 5 points (`sft_fedmed_llm_rounds`: +20% once,
and a healthy run's second point jumps 22%; `sft_phi2_lora_five_epochs`) and a 0.02
excursion of a loss near 0 (`sft_geollm_ptuning_130ep`); reward components and held-out
scores under a project's own names (`reward/f` of the three `grpo_leetcode_*`,
`grpo_sqli_agent_epochs`' DCS, the chrF of `grpo_rank_gpt2_chrf` and
`dpo_mt_chrf_five_epochs`); a share of groups without a spread logged as `availability`
(`grpo_rho_gsm8k_groups`); the slow KL of `grpo_rank_gpt2_chrf` (0.03 nats in 80 steps,
what a penalised KL does in its first steps) and the implicit rewards of
`dpo_gemma2b_kithara_gpu_ref`; a 0.4% rise of an eval loss (`sft_unsloth_qa_six_epochs`).

As printed by `runwatch health-eval --split train` (146 runs; the engine before these
changes, a9d3258, and after them, both at 04:26-04:35 UTC side by side, load average 1-9,
which the figures do not depend on; the same after figure again at 04:51 with the count
fix, 3075013):

```
before: train: 86 of 99 pathologies found (87%), median delay 4 logged points;
        0 of 47 healthy runs with a warning
after:  train: 88 of 99 pathologies found (89%), median delay 4 logged points;
        0 of 47 healthy runs with a warning
```

Per class, before → after (the others unchanged):

| class | runs | found | false + | median delay (points) |
|---|---|---|---|---|
| loss_not_falling | 16 | 12 → 13 | 8 → 8 | 7 → 7 |
| loss_spike | 10 | 6 → 7 | 8 → 8 | 0 → 0 |

The default recipe runs still raise no warning (`tests/health/test_recipes_health.py`).
The `train` figure is tuned on and says only that the fixes hold; the next clean figure
is round 10's.

#### Round 10, scored once (session 11)

28 new public logs from repositories new to the corpus (19 with a pathology, 9 healthy),
collected by three readers the same way as rounds 6-9 while the changes above were made on
`train`, labelled from reading each log and committed (0c22e6f) before being scored once,
with the engine of b06e684, as printed by `runwatch health-eval --round 10` at 04:56 UTC
(two more staged runs, rebuilt from their authors' notes rather than a log, were left out
before the score):

```
holdout round 10: 16 of 19 pathologies found (84%), median delay 3 logged points;
1 of 9 healthy runs with a warning
  grpo_levelforge_tool_env_62steps: grpo.no_signal
  (not counted: sft_mistral7b_v02_translator_4ep: run.stalled)
```

27 of the 28 runs were marked doubtful by their own reader before the score (a few points,
a model card's table of a handful of evaluations, a window of a longer run, a reward read
without its group spread); most files are trimmed to the keys the rules read or rebuilt
from a printed table. The one run no reader doubted (`grpo_tinker_llama70b_code_neutral`)
was found, both its labels. `run.stalled` is a process finding (the log's last point is
old), not counted as a warning on the run's training.

| class | runs | found | false + | median delay (points) | missed |
|---|---|---|---|---|---|
| dpo_over_optimisation | 3 | 1 | 0 | 2 | two, below |
| entropy_collapse | 1 | 1 | 1 | -2 | — |
| length_truncation | 1 | 0 | 0 | — | grpo_tinker_qwen3_30b_think_math (2nd) |
| loss_not_falling | 3 | 2 | 1 | 31.5 | sft_medllm_small_real_lora_8ep |
| loss_rising | 1 | 1 | 0 | 2 | — |
| loss_spike | 0 | 0 | 2 | — | — |
| nan | 1 | 1 | 0 | 0 | — |
| overfitting | 4 | 4 | 0 | -1 | — |
| reward_hacking | 1 | 0 | 1 | — | grpo_tinker_llama70b_code_okay |
| reward_zero_variance | 4 | 3 | 1 | 3 | grpo_tinker_ctxdistill_reward_only |
| rl_no_progress | 7 | 7 | 4 | 4 | — |

Runs count a run's main label and its secondary ones, "2nd" marking a secondary label
missed; the line above counts main labels. The two dpo_over_optimisation runs missed:
`dpo_llama32_1b_padded_heavy_5ep` and `dpo_zephyr7b_beta_three_epochs` (2nd).

The whole held-back part with this engine, as printed by `runwatch health-eval --split
holdout` at 05:01-05:05 UTC (round 9 scores as it did with the engine it was first scored
with: the changes above found nothing new on it, and warned on none of its runs):

```
holdout: 39 of 49 pathologies found (80%), median delay 3 logged points;
1 of 29 healthy runs with a warning
holdout round 1: 3 of 3 (100%); round 4: 0 of 5 healthy runs with a warning;
round 9: 20 of 27 (74%); round 10: 16 of 19 (84%)
```

So the held-back figures after this session: **80% recall (39 of 49), median delay 3
points, one warning on one of its 29 healthy runs** (`grpo.no_signal` on
`grpo_levelforge_tool_env_62steps`, a 62-step tool-use run its reader marked doubtful).
The delay target is met; the recall target (90%) and the no-warning target are not. Round
10 stays held back (it is not spent on fixes this session), so the held-back share is 78 of
224 runs (rounds 1, 4, 9 and 10), over a third.

"""

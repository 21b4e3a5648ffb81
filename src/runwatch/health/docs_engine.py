"""docs/health.md's first part: how the engine judges a run (detectors, thresholds,
findings, judging few points, the stress set). `{detectors}` is filled with DETECTOR_DOCS,
`{settings}` with the run settings the rules read, and `{RULE_ID:PARAM}` with that rule's
default parameter (`{RULE_ID:PARAM%}` as a percentage; `runwatch.health.docs.fill`), so
the text says the numbers the rules hold."""

ENGINE = """# Health rules

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
Store a project's overrides with `runwatch thresholds PROJECT FILE` (with the runs
folder's `--dir` and the index's `--db`, as for any command; `--clear` removes them, no
FILE shows them; the server has no route for them) and its runs are re-evaluated; try a
file on one run without storing anything with `runwatch runs health RUN --thresholds
FILE`.

The overrides are kept in the runs folder, in `.runwatch/thresholds/PROJECT.yaml`
(written whole, as the command validated it), and in the index, where the rules read
them. The folder is the record: an index made again from it (a damaged one deleted,
another `--db`) reads the files back before it judges a run, so its findings are the
ones the old index had, and every index of one folder (two servers on it, each with its
own `--db`) judges with the same overrides. A pass of the indexer reads a file that is
newer than what its index holds (its mtime against the index's `updated_ts`), so a file
edited by hand is read by the next pass of a server or `runwatch ui`, by `runwatch index`,
by `runwatch thresholds PROJECT` and by any read command (`runs health`, `runs list`, …: an
edited thresholds file is news that makes them index the folder first), and the project's
runs are judged again. A file
that is not valid YAML, or that the command would refuse, changes nothing: the project
keeps the overrides the index last read, and the pass says so once, naming the file and
what is wrong (a server logs it; `runwatch thresholds PROJECT` says it each time). With
several runs folders indexed into one index, a project has one set of overrides there:
the newest file of any of them. An index with no runs folder (a team server's PostgreSQL
that only takes runs over HTTP) is the overrides' only store, and the command says so:
keep the file you stored. Budget rules read their budget from the run's
`config.yaml` at any depth; `settings` supplies one the config lacks. The settings the
rules read are
{settings};
a file that names another (a misspelt one, which no rule would ever read) is refused, as
is a section or a rule's entry that is not a mapping. A `severity` set here is the
severity the rule reports: a rule that turns from info to warning as its evidence grows
(`repeat`, `warn_after`) stays at the severity the project chose, and one that says info
while the run learns (`Rule.learning`) or on a window cut from a longer run reports the
chosen severity all the same.

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
detector's context such as the rolling `median`, a trend's `effect` or the `budget`; a
trend's `levels`, its window's first and last levels and its low and high, and for a
divergence the reference's `reference_levels` over the same window), a
`message` and the `advice`. A trend's message states its change between its window's
end levels (a percentage of the first when both are positive, else the difference),
where the rule decides on the change relative to the window's median. Non-finite values appear in
evidence as the text `NaN`, `Infinity` or `-Infinity`. A `run.stalled` finding of a run
still running is computed when findings are read (its `id` is null); once metrics arrive
again the stall is stored as resolved.

One cause at one step is one finding: every metric that is NaN or infinite at the same
logged steps joins one `metric.non_finite` incident (consecutive bad steps extend it),
whose `evidence.metrics` and `metrics` list them all and whose message names them and
every kind of value the incident held ("loss, grad_norm and rewards/margins were NaN at
step 18.", "loss was NaN, Infinity or -Infinity at 3 logged steps from 1 to 3."; its
`evidence.values` keeps each metric's first). Findings of event rules
(spikes, jumps, non-finite values) that start at the same step are listed as one
incident: an open finding leads a resolved one, then the most severe leads (its id, rule
and advice), the messages follow one another, `metrics` names every metric and
`evidence.incident` keeps each merged finding's rule id, id, severity, status, metric and
message. Findings of rules that judge one
signal at different speeds (an entropy falling, collapsing and fallen to a quarter; see
`Rule.signal`) whose steps overlap are listed as one the same way, starting at the first
of them; its message is the lead's, naming the others by their titles (their own messages
would say the same thing again). So are the findings of one rule on one metric through
several of its variants (`grpo.reward_hacking` judges `val/accuracy` against the task
score and against the reward: one fall, not two). A merged finding is open while any of
its findings is, and as severe as the worst of them; the lead says what holds now: a
warning that resolved under an info still open (overfitting over, the validation loss
still above its best) is listed as an open warning led by the info, whose message names
the other "(warning, resolved at step 299)", and `--fail-on warning` judges every
finding, merged or not.
Among findings as open and as severe, the rule listed first in the catalogue leads,
except that a loss's rise since its start (`loss.doubled`, then `loss.above_start`)
leads the rules that read its latest points: a loss that
explodes reads "loss rose 731-fold over 118 steps (median 1.001 to 732.1)", not "rose 96%
over the last 16 logged points". A rise of ten times or more is said as a multiple. The
server's count of open findings
(`runwatch_health_findings_open`, docs/prometheus.md) counts them as they are listed: one
per incident, at its severity (the worst of its findings). Repeated loss spikes within
`hold` points are one `loss.spike` finding, which turns from info to warning at the
second; its message gives the latest jump and counts them from the first ("35 jumps from
step 62, each within 10 points of the one before, the highest to 829.5"). Messages
state changes in words with their numbers ("loss fell only 2.0% over 897 steps (0.69
to 0.676)."), and a resolved finding describes what held, not the change that ended it.
A message names a metric as the run logs it (a TRL run's `kl`, where `metric` holds its
canonical name, `fb/loss/kl_ref/mean`); a key read through a transform is named with both
("val/loss (from eval_perplexity)"). Its advice names settings and metrics the same way:
this page writes runwatch's names in code type, and a finding names each as the run's
config and log do (a TRL run is told `max_completion_length` and `frac_reward_zero_std`);
a metric the run does not log, and a setting its trainer lacks, are said in words ("a
penalty on overlong completions in the reward (runwatch's recipe setting
overlong_penalty_factor)").
Its numbers are those of the step it resolved at, however the log
arrives: a whole imported file, read as one batch, gives each finding the numbers a run
indexed line by line gives it (each flat stretch its own fall, each spike the median
before it), because a batch in which findings resolved is fed again from its start, cut
after each step where one resolved. Its severity too: a rule that says info once the run
learns (`Rule.learning`) asks whether the run had learned by the step its finding
resolved at, not by the end of the batch. In a log whose steps repeat or go back, a rule
of one metric is cut at the points where its findings resolved; a rule that lines up two
metrics by step cannot be cut there, and its findings that resolved inside a batch carry
the numbers of the batch's end.

## Judging with few points and a warm-up

Trend rules wait for their window (a `trend` needs half its buckets, `no_progress` its
`warmup` of {sft.loss_not_falling:warmup} logged points, or in a run logged sparsely
`warmup_steps` ({sft.loss_not_falling:warmup_steps}) training steps and at least
`min_points` ({sft.loss_not_falling:min_points}) logged points) so the noisy first steps
of a run (a learning-rate warm-up, a DPO loss sitting at log 2) cannot raise them, and
"where it started" is the higher of the first value and the first bucket's median, so a
loss that dropped in its first points and then drifts down slowly has fallen. The warm-up
in steps is why a loss logged every 50 steps is judged after 10 logs (500 steps), not
after 30 (1,500 steps); with 200 steps no healthy `train` run raises it, while 10 points
alone raise it on two (a DPO loss at step 10, an SFT loss at step 45, both still in their
first fall). Where a run logs too few points for a rule that needs most of its latest ones
(`grpo.zero_variance`: {grpo.zero_variance:k} of the last {grpo.zero_variance:n}), a rule
that needs fewer, or one extreme value, judges it: `grpo.truncation_extreme` (a share of
completions cut above {grpo.truncation_extreme:above} on one step), `grpo.no_signal` (no
group with a reward spread, a share above {grpo.no_signal:above}, on {grpo.no_signal:k} of
the last {grpo.no_signal:n} logged steps, so from a run's {grpo.no_signal:k}th logged step
on; {grpo.no_signal:k_binary} of {grpo.no_signal:n} where the share is only ever exactly 0
or 1, a run of one group a step), `dpo.over_optimisation` (one margin above
{dpo.over_optimisation:above}). Rules that judge against noise (`loss.spike`,
`rl.no_progress`) measure it on the series itself, so a run logged every 10 steps is
judged on its own scale. Before `rl.no_progress` has the {rl.no_progress:min_points}
points it measures noise on, from {rl.no_progress:early_points} points on it says (info)
that a reward has not risen at all: the median of its latest half not above its first
half's, its Theil–Sen slope not above 0 and its latest point not above the first half's
median (one measure alone flickers on a noisy rise: on simulated rewards rising 0.4 noise
widths a point, the three together open an early finding in 18% of runs, the median pair
alone in 30%). The early finding holds until the {rl.no_progress:min_points}th point,
where the rule judges afresh, so from there on the verdicts are the noise test's alone and
an early finding never holds a reward that test would release.

A run that has ended is judged once more, on its whole log. While a run is running, a flat
loss over its first points means nothing, and `sft.loss_not_falling` and
`dpo.loss_not_falling` wait for their warm-up; a run of a few epochs logged once each, or
a short fine-tune, ends before it. When the run succeeds (the SDK's `finish`, an import,
or an end status streamed over HTTP: the index reads it from the run's events) the engine
judges `loss.flat_finished_run` on everything the run logged, if the live rule never
judged it: a finding when the loss never stood {loss.flat_finished_run:min_change%} below
where it started, or ended less than {loss.flat_finished_run:end_change%} below it, and
did not end {loss.flat_finished_run:min_change%} above it; a warning from
{loss.flat_finished_run:warn_after} logged points on and an info on fewer (a handful of
points cannot tell a loss that does not fall from one that has not fallen yet). Each
reading is the kindest to the run (the higher start, its lowest point), so a short run
whose loss falls 5-20% in noise is not flagged because its last point bounced back up. A
run that failed or was cancelled is not judged (its end is the news), nor a loss already
near 0. A log that starts far from step 0 (a window of a longer run) or, by the run's own
`epoch`, at a first epoch that is a fraction above 0.05 and above 3 of the log's epoch
strides (a window whose lines were numbered from where it was cut) gets an info: the
window is flat, but the run may have learned before it. Where nothing about a loss that
does not fall is open at the end, `loss.fell_little` states, as an info and never more, a
loss that ended less than 15% below where it started by the same readings: readers of the
labelled corpus split on how little a fall is too little (on the train split, 18 such
finished logs are labelled healthy and 15 not falling; from 15% on, 176 healthy and 3 not
falling), so the engine says the fall and leaves the verdict to the user. Points that
arrive after the end are judged with it again; the end read twice changes nothing.

A rule about a run's learning signal (groups without a reward spread, a DPO loss not
yet down 5%) names the metric that shows the run learning (`Rule.learning`: the reward,
the DPO margin), and its finding is info, with a sentence saying so, while that metric
has risen beyond its own noise: the mean of its latest half (at most 25 points, from 10
points on) above its first half's, or above its chance level where there is one (a DPO
margin is 0 while the policy is the reference), by 2 standard errors of the series'
point-to-point noise. The run has one such gate per metric (and chance level), fed once
per batch from the run's first point and read by every rule that names it: the three GRPO
rules about groups without a spread share the reward's, so a rule whose metric a run logs
only later still judges the reward since the start. What such a rule reports has not yet
stopped the run learning; once the metric stops rising the same finding is a warning. A
one-prompt-a-step GRPO run
(groups alike on a quarter of its steps while its reward climbs from 0.2 to 1.6) and a
DPO loop of 8 pairs a batch (a loss noisy by 5% a log, 2% down at step 240, while its
margin stands at 0.06 against noise of 0.08) warned; they are info now. An isolated
spike of the KL to the reference is info too (a KL estimated on one group); a second
within the finding's 5 points is the warning, as for `loss.spike`. A spike of the
gradient norm is info however often it repeats: the norm is logged before clipping,
which bounds the update it measures.

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

A rule that does not apply to a kind of run names the metrics that tell it (`not_with`):
it does not start on a run that logs one, and one that started stops, its open finding
resolved, when one appears. A multi-turn run logs `terminated_ratio` or `num_turns_mean`,
and its `truncated_ratio` counts episodes cut short by the turn limit or the context:
`multiturn.unfinished_episodes` judges it, and the completion budget rules
(`grpo.truncation`, `grpo.truncation_rising`, `grpo.truncation_extreme`), whose advice is
to raise `max_sample_tokens`, do not.

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
finding open and stays info, where it used to become a warning at 30 points; a reward
that has gained twice that on 6 judgements in a row has risen, and from then on is "not
improving" only once its latest median is back below its first (a reward that rose
0.44 -> 0.58 under a noise of ±0.2 a step dipped within one standard error of its start
on one of 90 judgements: a dip, not a run that does not learn); a loss "turning back up"
rises by half its level over 16 points, well beyond the wander of a settled loss, and
one "climbing" (`loss.climbing`) by a third over 32 points, both beyond 3 standard
errors of such a rise in the loss's own noise. An entropy that falls to a quarter of
where it started (the median of its first points, so one high first log is no fall;
`grpo.entropy_low`) has collapsed whatever the window: in the corpus the largest fall
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
"""


# the detectors' table: (name, when it fires)
DETECTOR_DOCS = (
    ("threshold", "a value is above/below a limit on *k* of the last *n* points (optionally "
     "after `min_points`; *k* is `k_binary` while every value has been exactly 0 or 1); a "
     "budget rule's limit is a fraction of a run setting such as `max_sample_tokens`"),
    ("pinned", "a value equals exactly the lowest the series has taken (with `side: top`, "
     "the highest), and has taken before, on *k* of the last *n* points (a new low is no "
     "hit); with `unless_setting`, silent where the run's config gives that setting (a rule "
     "that reads the limit from the log, where a budget rule can read it from the config)"),
    ("spike", "a value exceeds `factor` × the rolling median of the previous `window` points "
     "(the median taken as at least `min_median`; or falls below `drop` × it); with "
     "`noise_k`, a rise must also stand `noise_k` robust standard deviations of the window "
     "(by its median absolute deviation) above the median, refreshed with it; the finding "
     "stays open `hold` points"),
    ("trend", "the Theil–Sen slope over the last `window` points (on 8 bucket medians) moves "
     "the series by at least `min_effect` (`relative`: as a fraction of its level) `up` or "
     "`down`, or by less than it (`flat`); a holding trend is released only when the effect "
     "clearly leaves it; with `recent_z`, it holds only while the latest half of the window "
     "still moves that way by a quarter of `min_effect` and by `recent_z` widths of the "
     "series' point-to-point noise (a series that rose once and settled has stopped); with "
     "`noise_z`, a rise or fall holds only beyond `noise_z` standard errors of such a "
     "change in the window's own point-to-point noise (the robust spread of its changes "
     "around the typical one, over √2; where a bucket holds several points, measured on "
     "the points and scaled to a bucket's median): a held-out score averaged over a few "
     "samples jumps by a fifth between validations; with `undone`, a rise (or fall) holds "
     "only while, over the last `undone` windows, the series has not swung against it by "
     "as much as the window's change: risen that far from a low and fallen back as far "
     "within a quarter window, on medians of 3 points (a loss that creeps up through each "
     "epoch and steps down at the next one's start is in a cycle)"),
    ("no_progress", "after `warmup` points (or `warmup_steps` steps and `min_points` "
     "points), the latest bucket median has not moved `min_change` (relative) from the "
     "first; with `max_spread`, only while every point so far lies within that fraction of "
     "the start (no noise at all); with `noise_z`, only while the change is short of "
     "`min_change` by `noise_z` standard errors of the two medians' difference in the "
     "series' point-to-point noise, a noisy series compared by medians of as many points "
     "(5 to 16) as show a move of `min_change` in that noise, its first against its "
     "latest, and one too noisy for 16 not judged (a single batch's loss swinging by a "
     "third between steps shows no fall of 5% in a 5-point median); with `moved` (a fall "
     "that is the finding) it holds the other way, and once held is released only when "
     "two thirds of the fall are gone; with `window_info`, a verdict on a log that starts "
     "mid-run (as `whole_window` reads it) is an info; with `latest`, where the series "
     "stands is the median of its latest `latest` points once that many follow the first "
     "bucket (two bad batches in a row carry a median of 3, not one of 5)"),
    ("no_improvement", "after `min_points`, the median of the latest *k* points (*k* = half "
     "the points so far, at most `head`) has not gained on the median of the first *k* by "
     "more than `z` standard errors, the noise being the robust spread of the series' "
     "point-to-point changes; from `early_points` until `min_points`, has not gained at "
     "all; once it has gained twice that on 6 judgements in a row (it rose), only while "
     "the latest median is back below the first; with `mean_z`, a judgement where the "
     "latest *k* points' mean stands `mean_z` standard errors above the first *k*'s (each "
     "half's error from its own spread) counts as a gain too (a reward of mostly 0 that "
     "pays on a growing share of steps)"),
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
    ("excursion", "the median of the last 3 points rose above the level before (the median "
     "of the `window` points before) by `min_rel` of it and by `z` robust standard "
     "deviations of those points, stayed out `stay` points or more, and came back to within "
     "`back` of the level: found when it ends"),
    ("above_best", "after `min_points` points, the last `k` points in a row lie above the "
     "series' best so far (its running minimum) by `min_rel` of it, or one point by "
     "`single`; it holds while the series stays above the best by half of `min_rel`; with "
     "`direction` down, below its best (its running maximum, while that is above 0) by "
     "`min_rel` of it and by `min_drop` in the series' unit; with `back_k`, a finding is "
     "released only once the series is back within half of `min_rel` of its best on that "
     "many points in a row"),
    ("above_max", "from `min_history` points on, a value above `factor` times the highest "
     "the series logged before it (while that is above 0): a jump seen without an "
     "estimate of the noise, on a run's first points too; with `magnitude`, sizes are "
     "compared whatever their sign, once the largest earlier size is at least `floor`; with "
     "`repeat`, a finding holding that many (within `hold` points of each other) is a "
     "warning"),
    ("isolated", "a value `factor` times the median of the up to `window` points before it "
     "(at least `min_history` of them), and the point after it back within `back` times "
     "that median, and the point before it not as high (a stretch of high values is no "
     "isolated spike): found at the point that comes back, starting at the spike's step"),
    ("upturn", "the median of the latest 3 points stands `min_rel` (relative) above the "
     "series' lowest median of 3, `min_points` or more points have been logged from that "
     "low on (the low included), and the Theil-Sen trend through them (the latest `window` "
     "at most) rises by `z` standard errors in the series' own point-to-point noise (no "
     "less than the smallest change it logged)"),
    ("divergence", "one series trends one way while another trends a given way over the "
     "same steps (e.g. training up, validation down; validation loss up while validation "
     "reward does not fall; `not_up`: flat, or short of a rise of the effect by `noise_z` "
     "standard errors over a whole window); with `noise_z`, the judged series' move must "
     "pass its noise as for `trend`; with `a_noise_z`, the reference's move must pass its "
     "own too, with and without the window's latest point (one leap is no trend), both "
     "noises measured on the series' history rather than the window"),
    ("diverged", "a validation above `factor` times its lowest earlier one while the "
     "training series' latest point (logged up to the validation's step, from "
     "`min_history` points on) stands above `factor` times the highest it logged before; "
     "starts with whichever series the run logs first"),
    ("gap_rising", "a validation above the one before it by `min_rel` (relative) while it "
     "stands at `ratio` times the training series' latest point (logged up to the "
     "validation's step) or more; starts with whichever series the run logs first"),
    ("flat_since", "from the `min_points`-th validation on, the validation loss has fallen "
     "less than `min_change` (relative) since its first value and the training loss logged "
     "since that step (8 points or more) less than it too (its latest 5 points' median "
     "against the higher of its first point and its first 5 points' median); with "
     "`noise_z`, the training loss is compared by medians of as many points (5 to 16) as "
     "show a fall of `min_change` in its point-to-point noise, and one too noisy for 16 is "
     "not judged flat"),
    ("whole_window", "judged only once the run has succeeded, on its whole log of "
     "`min_points` points or more, where no `no_progress` rule on the same metric judged it "
     "(with `after_signal`: whatever they judged, where no finding of a rule of that "
     "signal that reads the same metric is open at the end): "
     "the series never stood `min_change` (relative) below its start (the higher of its "
     "first value and the median of its first third, 1 to 5 points) and its latest third's "
     "median ended within `min_change` of it; not on a start at or below `min_level`; an "
     "info (`mid_run`) on a log that starts more than 3 logging strides after step 0, or "
     "whose first epoch is a fraction above 0.05 and above 3 epoch strides, and on a "
     "series that fell at each of its latest 5 points or more, by 0.5% of its start in all "
     "(`still_falling`)"),
    ("nonfinite", "any metric is NaN, +Infinity or -Infinity"),
    ("stall", "a running run logs nothing for `factor` × its usual step interval, and at "
     "least `min_seconds`"),
)

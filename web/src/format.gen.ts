// Generated from src/runwatch/rundir/format.py by its typescript(); do not edit:
// change format.py and write this file again (see docs/web.md).

// Log levels from least to most severe, with their ranks.
export const LOG_LEVEL_RANK: Record<string, number> = { debug: 10, info: 20, warning: 30, error: 40, critical: 50 };

// Phases in which a run has ended, and in which it holds its devices.
export const TERMINAL_PHASES: readonly string[] = ["CANCELLED", "FAILED", "SUCCEEDED"];
export const ACTIVE_PHASES: readonly string[] = ["CANCEL_REQUESTED", "PREPARING", "RUNNING"];

// Phases in which a run trains: its training time is its time in them.
export const TRAINING_PHASES: readonly string[] = ["RUNNING", "CANCEL_REQUESTED"];

// What the reason of the SDK's final event holds when records were not written (the disk refused them, they were too large for a reader, the writer failed).
export const RECORDS_LOST = "could not be written";

// Pacing, the pure half: GCRA reservations, the window oracle, backoff, the wait-or-defer rule, adaptive rate.
export { gcraLimits, reserve } from './gcra';
export type { GcraLimits, GcraState, RateLimitSpec, Reservation, ReserveRequest } from './gcra';
export { maxInAnyWindow, windowViolations } from './slidingWindow';
export { backoffMs } from './backoff';
export type { BackoffOptions, RandomSource } from './backoff';
export { sleep, sleepUntil, waitForSlot } from './sleep';
export { decideWait } from './deferPolicy';
export type { WaitDecision, WaitInput } from './deferPolicy';
export { initialRate, onSucceeded, onThrottled } from './adaptiveRate';
export type { AdaptiveRateOptions, AdaptiveRateState } from './adaptiveRate';
export { PacingConfigError } from './errors';

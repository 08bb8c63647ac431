// The error a call throws, as its own class, for asserting its fields (a bare toThrow would not say which rule fired
// or hand over the problems it lists).

/**
 * Calls `fn` and returns what it threw, when it is a `type`.
 * @throws what `fn` threw when it is anything else, or an Error saying nothing was thrown.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function thrown<E extends Error>(fn: () => unknown, type: new (...args: any[]) => E): E {
  try {
    fn();
  } catch (error) {
    if (error instanceof type) return error;
    throw error;
  }
  throw new Error(`expected a ${type.name}, nothing was thrown`);
}

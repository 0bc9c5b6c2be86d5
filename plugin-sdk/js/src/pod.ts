import type { Pod, Resources, StringMap } from './types.js';

function lookup(map: StringMap, key: string): string | undefined {
  for (const [k, v] of map) if (k === key) return v;
  return undefined;
}

/** The pod's label `key`, or undefined. */
export function label(pod: Pod, key: string): string | undefined {
  return lookup(pod.labels, key);
}

/** The pod's annotation `key`, or undefined. */
export function annotation(pod: Pod, key: string): string | undefined {
  return lookup(pod.annotations, key);
}

/** The pod's node selector `key`, or undefined. */
export function nodeSelector(pod: Pod, key: string): string | undefined {
  return lookup(pod.nodeSelector, key);
}

/** `numerator / divisor` rounded up, for non-negative bigints (`divCeil(1500n, 1000n)` is 2n). */
export function divCeil(numerator: bigint, divisor: bigint): bigint {
  const quotient = numerator / divisor;
  return numerator % divisor > 0n ? quotient + 1n : quotient;
}

/** Whole vCPUs the resources need, rounded up (`cpu-millis` 1500 → 2), for `minVcpus`. */
export function vcpusCeil(resources: Resources): number {
  return Number(divCeil(resources.cpuMillis, 1000n));
}

/** Memory in MiB, rounded up, for `minMemoryMib`. */
export function memoryMibCeil(resources: Resources): bigint {
  return divCeil(resources.memoryBytes, 1n << 20n);
}

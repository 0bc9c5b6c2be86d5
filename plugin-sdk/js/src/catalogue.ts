// The instance-type catalogue as plugins see it: a query answered by the host. Plugin logic
// takes a `Catalogue` rather than calling the host import directly, so the same logic runs in
// unit tests against a FixedCatalogue (orca-plugin/testing).
import { currentHost } from './host.js';
import type { InstanceQuery, InstanceType } from './types.js';

/** A query as plugins write it: every field optional (see {@link anyQuery}), numbers for u64s allowed. */
export type QueryInput = Partial<Omit<InstanceQuery, 'minMemoryMib'>> & {
  minMemoryMib?: bigint | number;
};

/** A query that matches every type; set the fields that matter. */
export function anyQuery(): InstanceQuery {
  return {
    minVcpus: 0,
    minMemoryMib: 0n,
    minGpus: 0,
    architecture: undefined,
    families: [],
    excludeFamilies: [],
    names: [],
    limit: 0,
    zones: [],
  };
}

/** The whole query, with {@link anyQuery}'s values for the fields left out. */
export function toQuery(input: QueryInput): InstanceQuery {
  const query = { ...anyQuery() };
  for (const [key, value] of Object.entries(input)) {
    if (value !== undefined) (query as Record<string, unknown>)[key] = value;
  }
  query.minMemoryMib = BigInt(query.minMemoryMib);
  return query;
}

/** Answers instance-type queries. */
export interface Catalogue {
  /** Matching types, cheapest on-demand first (unknown prices last, then by name). */
  query(query: QueryInput): InstanceType[];
  /** One type by exact name. */
  get(name: string): InstanceType | undefined;
}

/** `get` as a query by one name; extend this to write a Catalogue with `query` only. */
export abstract class CatalogueBase implements Catalogue {
  abstract query(query: QueryInput): InstanceType[];

  get(name: string): InstanceType | undefined {
    return this.query({ names: [name], limit: 1 })[0];
  }
}

/** The catalogue of the orca host the plugin runs in (`query-instance-types`). */
export class HostCatalogue extends CatalogueBase {
  query(query: QueryInput): InstanceType[] {
    return currentHost().queryInstanceTypes(toQuery(query));
  }
}

/** The host's catalogue. */
export const hostCatalogue: Catalogue = new HostCatalogue();

/** Whether `t` passes every non-empty filter of `query`, as the host decides. */
export function matches(t: InstanceType, query: InstanceQuery): boolean {
  return (
    t.vcpus >= query.minVcpus &&
    t.memoryMib >= query.minMemoryMib &&
    t.gpus >= query.minGpus &&
    (query.architecture === undefined || query.architecture === t.architecture) &&
    (query.families.length === 0 || query.families.includes(t.family)) &&
    !query.excludeFamilies.includes(t.family) &&
    (query.names.length === 0 || query.names.includes(t.name)) &&
    // A type whose zones the catalogue does not know is kept, for the launch to find out.
    (query.zones.length === 0 ||
      t.zones.length === 0 ||
      t.zones.some((zone) => query.zones.includes(zone)))
  );
}

/** The host's order: cheapest on-demand first, unknown prices last, then by name. */
export function compareTypes(a: InstanceType, b: InstanceType): number {
  const byName = a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
  const x = a.onDemandPrice;
  const y = b.onDemandPrice;
  if (x !== undefined && y !== undefined) return x < y ? -1 : x > y ? 1 : byName;
  if (x !== undefined) return -1;
  if (y !== undefined) return 1;
  return byName;
}


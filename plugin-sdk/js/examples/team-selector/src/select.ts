// The team selector's logic, written against a Catalogue so unit tests pass a FixedCatalogue.
//
// Team `ml`: GPU types, g6 then g5 then g6e whatever the prices, never p5, at most `mlMaxGpus`
// (8) GPUs. Team `batch`: the five cheapest arm64 types that fit. A team listed in the settings'
// `teams`: its types, in its order (deploy/examples/custom-plugin's team-selector). Any other
// pod, or one naming its type with orca.research/instance-type: declined, the next plugin asks.
import {
  PolicyError,
  annotation,
  label,
  memoryMibCeil,
  parseSettings,
  vcpusCeil,
  type Candidate,
  type Catalogue,
  type InstanceType,
  type Pod,
} from 'orca-plugin';

export const NAME = 'team-selector-js';
export const TEAM_LABEL = 'team';
export const INSTANCE_TYPE_ANNOTATION = 'orca.research/instance-type';
const ML_FAMILIES = ['g6', 'g5', 'g6e'];

export interface Settings {
  /** Team name → instance types, best first. */
  teams: Record<string, string[]>;
  /** The most GPUs an `ml` pod may ask for. */
  mlMaxGpus: number;
}

/**
 * The settings from config.yaml: `{"teams": {"vision": ["g6.xlarge"]}, "mlMaxGpus": 8}`, both
 * optional.
 * @throws {PolicyError} `invalid-settings` naming what is wrong.
 */
export function parse(json: string): Settings {
  const raw = parseSettings(NAME, json);
  const settings: Settings = { teams: {}, mlMaxGpus: 8 };
  for (const [key, value] of Object.entries(raw)) {
    if (key === 'teams') {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) {
        throw PolicyError.invalidSettings(`${NAME} settings: teams must map team names to lists of instance types`);
      }
      for (const [team, types] of Object.entries(value)) {
        if (!Array.isArray(types) || !types.every((t) => typeof t === 'string')) {
          throw PolicyError.invalidSettings(`${NAME} settings: teams.${team} must be a list of instance type names`);
        }
        settings.teams[team] = types;
      }
    } else if (key === 'mlMaxGpus') {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
        throw PolicyError.invalidSettings(`${NAME} settings: mlMaxGpus must be a whole number >= 1, not ${JSON.stringify(value)}`);
      }
      settings.mlMaxGpus = value;
    } else {
      throw PolicyError.invalidSettings(`${NAME} settings: unknown field ${JSON.stringify(key)}, expected teams or mlMaxGpus`);
    }
  }
  return settings;
}

/**
 * Ranked candidates for the pod.
 * @throws {PolicyError} `declined` when the pod is not this plugin's; `no-match` when nothing
 * the team may use fits.
 */
export function select(pod: Pod, settings: Settings, catalogue: Catalogue): Candidate[] {
  if (annotation(pod, INSTANCE_TYPE_ANNOTATION) !== undefined) {
    throw PolicyError.declined(`the pod names its type with ${INSTANCE_TYPE_ANNOTATION}`);
  }
  const team = label(pod, TEAM_LABEL);
  if (team === undefined) throw PolicyError.declined(`the pod has no ${TEAM_LABEL} label`);
  const fits = {
    minVcpus: vcpusCeil(pod.requests),
    minMemoryMib: memoryMibCeil(pod.requests),
    zones: pod.zones,
  };
  const listed = settings.teams[team];
  if (listed !== undefined) {
    const found = catalogue.query({ ...fits, minGpus: pod.requests.gpus, names: listed });
    const candidates = listed
      .filter((name) => found.some((t) => t.name === name))
      .map((name) => ({ instanceType: name, reason: `team ${team}'s types` }));
    if (candidates.length === 0) {
      throw PolicyError.noMatch(`none of team ${team}'s types (${listed.join(', ')}) fits the pod's requests`);
    }
    return candidates;
  }
  if (team === 'ml') {
    const gpus = Math.max(pod.requests.gpus, 1);
    if (gpus > settings.mlMaxGpus) {
      throw PolicyError.noMatch(`team ml may use at most ${settings.mlMaxGpus} GPUs; the pod asks for ${gpus}`);
    }
    const rank = (t: InstanceType) => {
      const i = ML_FAMILIES.indexOf(t.family);
      return i < 0 ? ML_FAMILIES.length : i;
    };
    // The query answers cheapest first; a stable sort keeps g6 before g5 whatever the prices.
    const types = catalogue
      .query({ ...fits, minGpus: gpus, families: ML_FAMILIES })
      .sort((a, b) => rank(a) - rank(b))
      .slice(0, 20);
    return candidates(types, 'team ml: GPU types, g6/g5 first');
  }
  if (team === 'batch') {
    const types = catalogue.query({ ...fits, minGpus: pod.requests.gpus, architecture: 'arm64', limit: 5 });
    return candidates(types, 'team batch: cheapest arm64');
  }
  throw PolicyError.declined(`team ${JSON.stringify(team)} is not ml, batch or in the settings' teams`);
}

function candidates(types: InstanceType[], reason: string): Candidate[] {
  if (types.length === 0) throw PolicyError.noMatch(`${reason}: no type in the catalogue fits the pod`);
  return types.map((t) => ({ instanceType: t.name, reason }));
}

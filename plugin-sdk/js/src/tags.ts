// AWS's tag rules, as orca's host checks every plugin's tags (plugin-sdk/src/tags.rs).
import { rustDebugChar, rustDebugStr } from './rust-format.js';
import { ALPHANUMERIC } from './unicode.generated.js';

/** At most this many tags on one resource. */
export const MAX_TAGS = 50;
export const MAX_KEY_LEN = 128;
export const MAX_VALUE_LEN = 256;

/**
 * Why a tag is not acceptable to EC2 (a message naming the key and the rule it breaks, word
 * for word the Rust SDK's), or undefined when it is.
 */
export function validateTag(key: string, value: string): string | undefined {
  if (key.length === 0) return 'tag key is empty';
  const k = rustDebugStr(key);
  if ([...key].length > MAX_KEY_LEN) return `tag key ${k} is longer than ${MAX_KEY_LEN} characters`;
  if ([...value].length > MAX_VALUE_LEN) {
    return `value of tag ${k} is longer than ${MAX_VALUE_LEN} characters`;
  }
  if (key.slice(0, 4).replace(/[A-Z]/g, (c) => c.toLowerCase()) === 'aws:') {
    return `tag key ${k} uses the reserved aws: prefix`;
  }
  for (const c of [...key, ...value]) {
    if (!allowed(c)) {
      return `tag ${k} contains ${rustDebugChar(c)}; allowed are letters, digits, spaces and _ . : / = + - @`;
    }
  }
  return undefined;
}

// Rust's char::is_alphanumeric (Alphabetic or Numeric: Nd, Nl, No), or the punctuation AWS allows.
function allowed(c: string): boolean {
  return ALPHANUMERIC.test(c) || c === ' ' || '_.:/=+-@'.includes(c);
}

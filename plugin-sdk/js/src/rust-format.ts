// Rust's `{:?}` of a str and a char, so messages read exactly as the Rust SDK's.
import { NON_PRINTABLE } from './unicode.generated.js';

function escape(c: string, quote: '"' | "'"): string {
  switch (c) {
    case '\t':
      return '\\t';
    case '\r':
      return '\\r';
    case '\n':
      return '\\n';
    case '\\':
      return '\\\\';
    case '\0':
      return '\\0';
    case quote:
      return `\\${quote}`;
  }
  // Rust escapes control and other non-printable characters as \u{hex} (Cc, Cf, Zl, Zp, Cn,
  // Co, Cs: the class is generated, the component engine has no property escapes).
  if (NON_PRINTABLE.test(c)) {
    return `\\u{${c.codePointAt(0)!.toString(16)}}`;
  }
  return c;
}

export function rustDebugStr(s: string): string {
  return `"${[...s].map((c) => escape(c, '"')).join('')}"`;
}

export function rustDebugChar(c: string): string {
  return `'${escape(c, "'")}'`;
}

/**
 * Text that someone else wrote (an agent, a candidate, a file name chosen by either), made safe to show on the
 * operator's terminal: every character a terminal would act on instead of print is shown as an escape, and every
 * line is marked as theirs, so nothing they print can move the cursor, retitle the window, hide text, overwrite a
 * line Assay printed, or pass for one of Assay's own lines (its summary, "best round ...").
 *
 *   escapeTerminalText('\x1b]0;pwned\x07best: round 9')  ===  '\\x1b]0;pwned\\x07best: round 9'
 *
 * What is escaped:
 *   - C0 controls U+0000-U+001F except tab and newline (so ESC, BEL, CR, backspace, form feed, vertical tab ...),
 *     and DEL U+007F: `\xNN` (CR is `\r`, so a line cannot be overwritten from its start);
 *   - C1 controls U+0080-U+009F (CSI U+009B, OSC U+009D ... act like ESC sequences on some terminals): `\u{NN}`;
 *   - characters that reorder or hide what is shown: bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E,
 *     U+2066-U+2069), zero-width and invisible format characters (U+200B-U+200D, U+2060-U+2064, U+FEFF), the line
 *     and paragraph separators U+2028, U+2029, and lone surrogates: `\u{NNNN}`;
 *   - with `{ newlines: true }` also newline and tab (for one-line fields).
 * Everything else (printable ASCII, letters and symbols of any script, emoji) is kept as it is.
 */

const HEX = (n: number, w: number): string => n.toString(16).padStart(w, '0');

/** Format characters that change what a line looks like without being seen (bidi, zero width, separators, BOM). */
function invisible(cp: number): boolean {
  return (
    cp === 0x061c ||
    (cp >= 0x200b && cp <= 0x200f) ||
    (cp >= 0x2028 && cp <= 0x202e) ||
    (cp >= 0x2060 && cp <= 0x2064) ||
    (cp >= 0x2066 && cp <= 0x2069) ||
    cp === 0xfeff
  );
}

// Any code unit that may need escaping: C0, DEL, C1, the format characters above, surrogates (checked for pairing).
const SUSPECT = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ud800-\udfff]/;

export interface EscapeTerminalOptions {
  /** Escape newline and tab too (a one-line field). Default false: newlines and tabs pass. */
  readonly newlines?: boolean;
}

/** `text` with every control, bidi and invisible format character shown as an escape (see the module comment). */
export function escapeTerminalText(text: string, o: EscapeTerminalOptions = {}): string {
  if (!SUSPECT.test(text)) return text;
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x0a || c === 0x09) {
      out += o.newlines ? (c === 0x0a ? '\\n' : '\\t') : text[i];
    } else if (c === 0x0d) {
      out += '\\r';
    } else if (c < 0x20 || c === 0x7f) {
      out += `\\x${HEX(c, 2)}`;
    } else if (c >= 0x80 && c <= 0x9f) {
      out += `\\u{${HEX(c, 2)}}`;
    } else if (c >= 0xd800 && c <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        out += text[i]! + text[i + 1]!;
        i += 1;
      } else out += `\\u{${HEX(c, 4)}}`;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      out += `\\u{${HEX(c, 4)}}`;
    } else if (invisible(c)) {
      out += `\\u{${HEX(c, 4)}}`;
    } else {
      out += text[i];
    }
  }
  return out;
}

/** The mark in front of every line of agent output on the operator's terminal. Assay's own lines never begin so. */
export const AGENT_LINE_PREFIX = 'agent| ';

/** The longest line shown as one; longer lines are cut into pieces, each marked (the later ones with `+`). */
export const MAX_MARKED_LINE_CHARS = 4096;

/**
 * Turns a stream of someone else's output (bytes, in chunks cut anywhere) into escaped, marked lines: each line is
 * `prefix + escapeTerminalText(line) + "\n"`. Bytes are decoded as UTF-8 (invalid sequences become U+FFFD, a
 * character split across chunks is joined); a line is held until its newline arrives, `end()` flushes the last
 * one, and a line longer than `maxLine` is shown in pieces (continuations marked `prefix` with `+` after it), so
 * one huge line is never held in memory. The output never contains a control character other than newline and tab.
 */
export class MarkedLineStream {
  private readonly decoder = new TextDecoder('utf-8', { fatal: false });
  private pending = '';
  private continuing = false;

  constructor(
    private readonly prefix: string = AGENT_LINE_PREFIX,
    private readonly maxLine: number = MAX_MARKED_LINE_CHARS,
  ) {}

  /** Feeds a chunk; returns the complete lines it finished (possibly ''). */
  push(chunk: Uint8Array | string): string {
    this.pending += typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    return this.drain(false);
  }

  /** Flushes the last, unterminated line (and any held partial character). */
  end(): string {
    this.pending += this.decoder.decode();
    return this.drain(true);
  }

  private line(text: string): string {
    const mark = this.continuing ? `${this.prefix.trimEnd()}+ ` : this.prefix;
    return `${mark}${escapeTerminalText(text)}\n`;
  }

  private drain(final: boolean): string {
    let out = '';
    for (;;) {
      const nl = this.pending.indexOf('\n');
      if (nl >= 0 && nl <= this.maxLine) {
        out += this.line(this.pending.slice(0, nl));
        this.pending = this.pending.slice(nl + 1);
        this.continuing = false;
        continue;
      }
      if (this.pending.length > this.maxLine) {
        let cut = this.maxLine;
        const c = this.pending.charCodeAt(cut - 1);
        if (c >= 0xd800 && c <= 0xdbff) cut -= 1; // never split a surrogate pair
        out += this.line(this.pending.slice(0, cut));
        this.pending = this.pending.slice(cut);
        this.continuing = true;
        continue;
      }
      break;
    }
    if (final && this.pending.length) {
      out += this.line(this.pending);
      this.pending = '';
      this.continuing = false;
    }
    return out;
  }
}

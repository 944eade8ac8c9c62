/**
 * Pure logic of the sdc_magic lab extension: which outputs of a notebook are cleared,
 * what the panel, the badges and the status bar say about them, and what the guard and
 * the settings decide. No JupyterLab import here, so node's test runner can test it.
 *
 * The rule mirrors `sdc_magic.redact.clearance()` except for the digest check, which
 * only the server does (the guard asks the server before deciding; see guard.ts).
 */

import { SDC_MIME, statusLabel } from './payload';

/** Statuses that `clearance()` lets through. */
export const CLEARED_STATUSES: ReadonlyArray<string> = ['pass', 'suppressed'];
/** Statuses the kernel side writes into `metadata.sdc_magic.status`. */
export const RECORD_STATUSES: ReadonlyArray<string> = ['pass', 'suppressed', 'review', 'blocked'];
/**
 * What the panel shows: the record's status; `note` for the analyst's working notes (printed
 * text, a Python value the kernel marked as not a table): never exported, but not a failure
 * either; `uncleared` for anything else.
 */
export type Status = 'pass' | 'suppressed' | 'review' | 'blocked' | 'uncleared' | 'note';
export const STATUSES: ReadonlyArray<Status> = ['pass', 'suppressed', 'review', 'blocked', 'uncleared', 'note'];
/**
 * Mime types a checked output may carry: the two its digest covers, and the widget view
 * (a reference to a model whose saved state redaction drops). Only a fallback: when the
 * server has answered, its `clearance()` decides.
 */
export const CHECKED_MIMES: ReadonlyArray<string> = [
  'text/html',
  'text/plain',
  'application/vnd.jupyter.widget-view+json',
  SDC_MIME
];

/** The subset of an nbformat output this module reads. */
export interface IOutputLike {
  output_type?: string;
  data?: { [mime: string]: unknown };
  metadata?: { [key: string]: unknown };
  name?: string;
  ename?: string;
  execution_count?: number | null;
}

/** The subset of an nbformat cell this module reads. */
export interface ICellLike {
  cell_type?: string;
  source?: string | string[];
  execution_count?: number | null;
  outputs?: IOutputLike[];
}

/** One hidden cell of a protected table, as the kernel records it. */
export interface IHiddenCell {
  cell?: unknown[];
  position?: number[];
  hidden?: string;
  reasons?: { rule?: string; message?: string }[];
  interval?: number[];
}

/** What the extension knows about one output. */
export interface IOutputInfo {
  /** Index of the cell in the notebook (all cells, markdown included). */
  cellIndex: number;
  /** Index of the output in its cell. */
  outputIndex: number;
  /** Execution count of the cell, if any. */
  executionCount: number | null;
  /** First line of the cell's source, shortened. */
  source: string;
  outputType: string;
  status: Status;
  /** Whether the output may leave the notebook (pass or suppressed, and nothing else in the bundle). */
  cleared: boolean;
  /** Why it may not (the same words as `clearance()`), or null. */
  why: string | null;
  /** The kernel's output id (`out-N`), if recorded. */
  id: string | null;
  kind: string | null;
  hidden: number;
  cells: number | null;
  /** Counts of hidden cells by rule, e.g. {threshold: 85, secondary: 12}. */
  rules: { [rule: string]: number };
  /** The record's notes, then one line per rule, plain words. */
  reasons: string[];
}

export interface ITotals {
  pass: number;
  suppressed: number;
  review: number;
  blocked: number;
  uncleared: number;
  /** Working notes: counted in `notCleared` too (the guard leaves them out of a download). */
  note: number;
  cleared: number;
  notCleared: number;
  total: number;
}

export interface ISummary {
  outputs: IOutputInfo[];
  totals: ITotals;
}

function isObject(value: unknown): value is { [key: string]: unknown } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function firstLine(source: string | string[] | undefined): string {
  const text = Array.isArray(source) ? source.join('') : source || '';
  const line = text.split('\n').find(l => l.trim() !== '') || '';
  return line.length > 60 ? line.slice(0, 57) + '…' : line;
}

function shorten(text: string, max = 240): string {
  return text.length > max ? text.slice(0, max - 1) + '…' : text;
}

/** The redactor's placeholder (text only, naming the reason): harmless, so a redacted copy opens clean. */
export function isPlaceholder(output: IOutputLike): boolean {
  const marker = isObject(output.metadata) ? output.metadata['sdc_magic_redacted'] : undefined;
  const data = output.data || {};
  const keys = Object.keys(data);
  if (!isObject(marker) || keys.length !== 1 || keys[0] !== 'text/plain') {
    return false;
  }
  const value = data['text/plain'];
  const text = Array.isArray(value) ? value.join('') : String(value);
  return text === `[sdc_magic: output removed — it was not cleared for release (${String(marker['reason'])})]`;
}

/**
 * Why an output may not leave the notebook, in `clearance()`'s words, or null when it
 * may (leaving aside the digest, which the server checks). Used until the server answers.
 */
export function localClearance(output: IOutputLike): string | null {
  const type = output.output_type || 'unknown';
  if (type !== 'display_data' && type !== 'execute_result') {
    return `${type} output`;
  }
  const record = isObject(output.metadata) ? output.metadata['sdc_magic'] : undefined;
  if (!isObject(record)) {
    return isPlaceholder(output) ? null : 'no sdc_magic record';
  }
  const status = record['status'];
  if (typeof status !== 'string' || CLEARED_STATUSES.indexOf(status) < 0) {
    return `status ${String(status)}`;
  }
  const extra = Object.keys(output.data || {})
    .filter(m => CHECKED_MIMES.indexOf(m) < 0)
    .sort();
  if (extra.length > 0) {
    return 'unchecked mime types ' + extra.join(', ');
  }
  return null;
}

/**
 * The status shown for an output, given why it may not leave (null: it may): a cleared
 * output shows its record's status (pass or suppressed); a record saying review or
 * blocked shows that; anything else (no record, a print, an error, a pass record on a
 * bundle the kernel did not check, a failed digest) is `uncleared`.
 */
export function outputStatus(output: IOutputLike, why: string | null = localClearance(output)): Status {
  const record = isObject(output.metadata) ? output.metadata['sdc_magic'] : undefined;
  const status = isObject(record) ? record['status'] : undefined;
  if (why === null && (status === 'pass' || status === 'suppressed')) {
    return status;
  }
  if (why === null && !isObject(record) && isPlaceholder(output)) {
    return 'pass';
  }
  if (why !== null && (status === 'review' || status === 'blocked')) {
    return status;
  }
  if (why !== null && isWorkingNote(output)) {
    return 'note';
  }
  return 'uncleared';
}

/**
 * A working note: printed text on stdout (never checked, never exported: the print guard warns
 * on stderr when it holds a pandas table), or a value the kernel's record calls a note (a dict,
 * a list, a number). Still not cleared: the guard and the redacted copy leave notes out.
 */
export function isWorkingNote(output: IOutputLike): boolean {
  if (output.output_type === 'stream') {
    return output.name !== 'stderr';
  }
  const record = isObject(output.metadata) ? output.metadata['sdc_magic'] : undefined;
  return isObject(record) && record['kind'] === 'note' && record['status'] === 'note';
}

/** `clearance()`'s reason in the words users see (no jargon). */
export function plainWhy(why: string): string {
  const words: { [why: string]: string } = {
    'stream output': 'printed text',
    'error output': 'error message',
    'no sdc_magic record': 'not checked by sdc_magic',
    'digest does not match the content': 'changed after it was checked',
    'status review': 'needs review',
    'status blocked': 'blocked',
    'status note': 'a working note (not a table)'
  };
  return words[why] || why;
}

/** Plain-words reasons for an output: the record's notes, then hidden cells by rule. */
export function describe(output: IOutputLike, why: string | null): {
  rules: { [rule: string]: number };
  reasons: string[];
} {
  const rules: { [rule: string]: number } = {};
  const reasons: string[] = [];
  const record = isObject(output.metadata) ? output.metadata['sdc_magic'] : undefined;
  if (!isObject(record)) {
    const type = output.output_type || 'unknown';
    if (type === 'stream' && output.name !== 'stderr') {
      reasons.push('printed text: for your own work, not checked, never exported');
    } else if (type === 'stream') {
      reasons.push('printed warnings or errors: not checked, never exported');
    } else if (type === 'error') {
      reasons.push(`error message${output.ename ? ' ' + output.ename : ''}: not checked, never exported`);
    } else if (isObject(output.metadata) && isObject(output.metadata['sdc_magic_redacted'])) {
      reasons.push('placeholder of a removed output');
    } else {
      // (a dict, a list, a number the kernel marked are working notes with a record of their
      // own; text without one may be a table printed by a kernel without the extension)
      const mimes = Object.keys(output.data || {});
      reasons.push(`not checked by sdc_magic (${mimes.join(', ') || 'no data'}): never exported`);
    }
    return { rules, reasons };
  }
  const notes = Array.isArray(record['notes']) ? (record['notes'] as unknown[]) : [];
  for (const note of notes.slice(0, 3)) {
    if (typeof note === 'string' && note.trim()) {
      reasons.push(shorten(note.trim()));
    }
  }
  if (notes.length > 3) {
    reasons.push(`… ${notes.length - 3} more note(s)`);
  }
  const hiddenCells = Array.isArray(record['reasons']) ? (record['reasons'] as IHiddenCell[]) : [];
  const example: { [rule: string]: string } = {};
  for (const cell of hiddenCells) {
    const seen = new Set<string>();
    for (const r of (cell && Array.isArray(cell.reasons) ? cell.reasons : [])) {
      const rule = (r && typeof r.rule === 'string' && r.rule) || 'unspecified';
      if (seen.has(rule)) {
        continue;
      }
      seen.add(rule);
      rules[rule] = (rules[rule] || 0) + 1;
      if (!(rule in example) && r && typeof r.message === 'string') {
        example[rule] = r.message;
      }
    }
  }
  for (const rule of Object.keys(rules).sort((a, b) => rules[b] - rules[a] || (a < b ? -1 : 1))) {
    const n = rules[rule];
    const msg = example[rule] ? ` — e.g. ${shorten(example[rule], 160)}` : '';
    reasons.push(`${rule}: ${n} cell${n === 1 ? '' : 's'} hidden${msg}`);
  }
  if (why !== null && !reasons.length) {
    reasons.push(plainWhy(why));
  } else if (why !== null && why.indexOf('status ') !== 0) {
    reasons.unshift(plainWhy(why));
  }
  return { rules, reasons };
}

/** Everything the panel and the badges show about one output. */
export function classifyOutput(
  output: IOutputLike,
  cellIndex = 0,
  outputIndex = 0,
  cell: ICellLike = {},
  serverWhy?: string | null
): IOutputInfo {
  // The server's answer, when there is one, is `clearance()` itself (digest included:
  // an edited output or a copied marker fails there); otherwise the local mirror.
  const why = serverWhy !== undefined ? serverWhy : localClearance(output);
  const status = outputStatus(output, why);
  const record = isObject(output.metadata) ? output.metadata['sdc_magic'] : undefined;
  const rec = isObject(record) ? record : {};
  const hidden = typeof rec['hidden'] === 'number' ? (rec['hidden'] as number) : 0;
  const { rules, reasons } = describe(output, why);
  return {
    cellIndex,
    outputIndex,
    executionCount: typeof cell.execution_count === 'number' ? cell.execution_count : null,
    source: firstLine(cell.source),
    outputType: output.output_type || 'unknown',
    status,
    cleared: why === null,
    why,
    id: typeof rec['id'] === 'string' ? (rec['id'] as string) : null,
    kind: typeof rec['kind'] === 'string' ? (rec['kind'] as string) : isPlaceholder(output) ? 'removed' : null,
    hidden,
    cells: typeof rec['cells'] === 'number' ? (rec['cells'] as number) : null,
    rules,
    reasons
  };
}

export function emptyTotals(): ITotals {
  return { pass: 0, suppressed: 0, review: 0, blocked: 0, uncleared: 0, note: 0, cleared: 0, notCleared: 0, total: 0 };
}

/** Key of an output in the server's answer: `cell:output`. */
export function outputKey(cellIndex: number, outputIndex: number): string {
  return `${cellIndex}:${outputIndex}`;
}

/**
 * Every output of a notebook (code cells only), classified, with totals.
 * `serverWhy` maps `outputKey(cell, output)` to the server's `clearance()` answer.
 */
export function summarise(cells: ReadonlyArray<ICellLike>, serverWhy?: Map<string, string | null>): ISummary {
  const outputs: IOutputInfo[] = [];
  const totals = emptyTotals();
  cells.forEach((cell, ci) => {
    if (!cell || cell.cell_type !== 'code' || !Array.isArray(cell.outputs)) {
      return;
    }
    cell.outputs.forEach((output, oi) => {
      const info = classifyOutput(output, ci, oi, cell, serverWhy ? serverWhy.get(outputKey(ci, oi)) : undefined);
      outputs.push(info);
      totals[info.status] += 1;
      totals.total += 1;
      if (info.cleared) {
        totals.cleared += 1;
      } else {
        totals.notCleared += 1;
      }
    });
  });
  return { outputs, totals };
}

/** Outputs that are not cleared and are not working notes: what needs the analyst's attention. */
export function needsAttention(totals: ITotals): number {
  return totals.notCleared - totals.note;
}

/** The status-bar text: `sdc: 12 cleared · 2 not cleared · 5 notes` (notes only when there are some). */
export function statusBarText(totals: ITotals): string {
  const notes = totals.note ? ` · ${totals.note} note${totals.note === 1 ? '' : 's'}` : '';
  return `sdc: ${totals.cleared} cleared · ${needsAttention(totals)} not cleared${notes}`;
}

/** The badge text of one output, e.g. `cleared, cells hidden · 14 hidden` (the users' vocabulary). */
export function badgeText(info: IOutputInfo): string {
  const label = statusLabel(info.status);
  return info.hidden > 0 && info.status !== 'uncleared' && info.status !== 'note' ? `${label} · ${info.hidden} hidden` : label;
}

/** Whether an output is one of the extension's own messages (banner, %sdc replies, progress). */
export function isMessage(info: IOutputInfo): boolean {
  return info.kind === 'message' || info.kind === 'progress' || info.kind === 'removed';
}

/** The badge tooltip / accessible description. */
export function badgeTitle(info: IOutputInfo): string {
  const head = info.cleared
    ? `sdc_magic: ${statusLabel(info.status)} — may be exported`
    : `sdc_magic: ${statusLabel(info.status)} — will not be exported`;
  return [head, ...info.reasons.slice(0, 4)].join('\n');
}

/** One line of the totals: `2 pass · 1 suppressed · …` (zero counts left out, total first). */
export function totalsText(totals: ITotals): string {
  const parts = STATUSES.filter(s => totals[s] > 0).map(s => `${totals[s]} ${statusLabel(s)}`);
  return `${totals.total} output${totals.total === 1 ? '' : 's'}` + (parts.length ? ': ' + parts.join(' · ') : '');
}

// --------------------------------------------------------------------------- guard

/** Commands that let a notebook leave JupyterLab as a file or a link. */
export const GUARDED_COMMANDS: ReadonlyArray<string> = [
  'docmanager:download',
  'notebook:export-to-format',
  'filebrowser:download',
  'filebrowser:copy-download-link'
];

/**
 * Whether an nbconvert format takes outputs along. Only the executable script does not
 * (measured: nbconvert's markdown, HTML, LaTeX, PDF and rst templates all include outputs).
 */
export function formatCarriesOutputs(format: string): boolean {
  return format !== 'script' && format !== 'python';
}

export function isGuarded(command: string): boolean {
  return GUARDED_COMMANDS.indexOf(command) >= 0;
}

/** The guard dialog's title. */
export function guardTitle(notCleared: number): string {
  return notCleared === 1 ? '1 output is not cleared for release' : `${notCleared} outputs are not cleared for release`;
}

/** The guard dialog's body text: why, and what the redacted copy is. */
export function guardMessage(notCleared: number, reasons: { [why: string]: number } = {}): string {
  const detail = Object.keys(reasons)
    .sort((a, b) => reasons[b] - reasons[a] || (a < b ? -1 : 1))
    .map(why => `${reasons[why]} × ${plainWhy(why)}`)
    .join('; ');
  const them = notCleared === 1 ? 'it' : 'them';
  return (
    (detail ? `Not cleared: ${detail}. ` : '') +
    `The notebook as it is would take ${them} along. ` +
    'The redacted copy, made by the sdc_magic server extension, keeps only the cleared outputs ' +
    'and puts a placeholder where the others were.'
  );
}

/** File name of a redacted copy: `analysis.ipynb` → `analysis.redacted.ipynb`. */
export function redactedName(path: string, extension = '.ipynb'): string {
  const base = path.split('/').pop() || 'notebook.ipynb';
  const stem = base.replace(/\.ipynb$/i, '');
  return `${stem}.redacted${extension}`;
}

// --------------------------------------------------------------------------- settings

export interface IGuardSettings {
  guardEnabled?: unknown;
  guardLocked?: unknown;
}

/**
 * Whether the export guard is on. An administrator locks it by setting
 * `guardLocked: true` (and `guardEnabled`) in JupyterLab's `overrides.json`: overrides
 * change the schema *defaults*, which users cannot edit, so when the default of
 * `guardLocked` is true the default of `guardEnabled` wins over the user's value.
 */
export function effectiveGuard(composite: IGuardSettings, defaults: IGuardSettings): {
  enabled: boolean;
  locked: boolean;
} {
  const locked = defaults.guardLocked === true;
  const source = locked ? defaults : composite;
  return { enabled: source.guardEnabled !== false, locked };
}

// --------------------------------------------------------------------------- versions

/** The panel's warning about the server side, or null when all is well. */
export function versionWarning(frontend: string, server: { status: number; version?: string } | null): string | null {
  if (server === null) {
    return 'The sdc_magic server extension did not answer: downloads of redacted copies will not work.';
  }
  if (server.status === 404) {
    return (
      'The sdc_magic server extension is not enabled (GET /sdc-magic/version: 404). ' +
      'Check `jupyter server extension list`; redacted copies need it.'
    );
  }
  if (server.status !== 200) {
    return `The sdc_magic server extension answered HTTP ${server.status}.`;
  }
  if (server.version !== frontend) {
    return (
      `Version mismatch: lab extension ${frontend}, server extension ${server.version || 'unknown'}. ` +
      'Reinstall sdc_magic and restart JupyterLab.'
    );
  }
  return null;
}

// --------------------------------------------------------------------------- kernel replies

/** Strip ANSI colour codes from traceback text. */
export function stripAnsi(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\u001b\[[0-9;]*[A-Za-z]/g, '');
}

/** The magic the Export button runs. Quotes the directory when needed; no directory:
 * the kernel's default, one folder per notebook (build/export/<notebook>/). */
export function exportCode(dir: string, ids?: ReadonlyArray<string | null> | null): string {
  const d = dir.trim();
  const quoted = /[\s"']/.test(d) ? JSON.stringify(d) : d;
  const code = d ? `%sdc export ${quoted} --force` : '%sdc export --force';
  if (!ids) {
    return code;
  }
  // the outputs the notebook shows now (saved or not): the kernel cannot see deletions
  const shown = ids.filter((id): id is string => typeof id === 'string' && /^[A-Za-z0-9_-]+$/.test(id));
  return `${code} --only=${Array.from(new Set(shown)).join(',')}`;
}

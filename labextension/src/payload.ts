/**
 * The kernel's `application/vnd.sdc-magic.v1+json` payload: its shape and the pure
 * helpers the renderer uses (no JupyterLab import: node's test runner tests them).
 * The payload holds only protected content (hidden cells are `✕`), as strings and ints.
 */

export const SDC_MIME = 'application/vnd.sdc-magic.v1+json';

/** One status vocabulary for users; the machine values stay pass/suppressed/review/blocked. */
export const STATUS_LABELS: { [status: string]: string } = {
  pass: 'cleared',
  suppressed: 'cleared, cells hidden',
  review: 'needs review',
  blocked: 'blocked',
  uncleared: 'not cleared',
  note: 'working note'
};

export function statusLabel(status: string): string {
  return STATUS_LABELS[status] || status;
}

export interface ITablePayload {
  shape: number[];
  index_names: string[];
  column_names: string[];
  /** Header rows: one per column level, one label per shown column. */
  columns: string[][];
  rows: { i: number; index: string[]; cells: string[]; hidden?: number[] }[];
  /** Position (in the shown rows / columns) where pandas-style truncation left a gap. */
  row_gap: number | null;
  col_gap: number | null;
}

export interface IReasonPayload {
  cell: string;
  row: number;
  col: number;
  why: string;
  interval: string;
}

export interface ISuggestionPayload {
  kind: string;
  title: string;
  state: string;
  detail: string;
  code: string;
  clean: boolean;
  preview: ITablePayload | null;
}

export interface IPayload {
  version: number;
  id: string;
  status: string;
  label: string;
  kind: string;
  summary: string;
  rules: string;
  hidden: number;
  cells: number;
  notes: string[];
  table: ITablePayload;
  reasons: IReasonPayload[];
  reasons_total: number;
  suggestions: ISuggestionPayload[] | null;
  more: boolean;
  answer: string;
  exception: string | null;
}

function isObject(value: unknown): value is { [key: string]: unknown } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The payload if `value` looks like one (else null: the renderer then shows a placeholder). */
export function asPayload(value: unknown): IPayload | null {
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch {
      return null;
    }
  }
  if (!isObject(value) || value['version'] !== 1 || typeof value['id'] !== 'string') {
    return null;
  }
  const table = value['table'];
  if (!isObject(table) || !Array.isArray(table['rows']) || !Array.isArray(table['columns'])) {
    return null;
  }
  return value as unknown as IPayload;
}

/** The header line: `needs review · 143 of 200 cells hidden (…) · out-2`. */
export function headerText(p: IPayload): string {
  return [p.summary, p.id].filter(s => s && s.trim()).join(' · ');
}

/** How many reasons are listed before "Show all". */
export const REASONS_SHOWN = 60;

/** The reasons to list: the first 60, or all of them. */
export function reasonsToShow(p: IPayload, all: boolean): IReasonPayload[] {
  return all ? p.reasons : p.reasons.slice(0, REASONS_SHOWN);
}

/** Why an action needing the kernel is not available, or null when it is. */
export function kernelNote(kernel: { status: string; connected: boolean } | null): string | null {
  if (!kernel) {
    return 'No kernel: run this cell again to request an exception or search for more options.';
  }
  if (kernel.status === 'dead' || !kernel.connected) {
    return 'The kernel is not running: restart it and run this cell again to use these actions.';
  }
  return null;
}

/** Number of lines a code box needs (at most 12; longer code scrolls). */
export function codeRows(code: string): number {
  const lines = code.split('\n');
  // a line wider than the box scrolls sideways: its scrollbar takes a row, which then hid the
  // last line of the code (issue 24.5)
  const scrollbar = lines.some(line => line.length > 72) ? 1 : 0;
  return Math.min(12, Math.max(2, lines.length + scrollbar));
}

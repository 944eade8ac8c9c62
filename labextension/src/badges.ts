/**
 * Badges on the outputs of a notebook: a small row above each output with its status
 * (colour plus text) and hidden-cell count, from the same classification as the panel.
 */
import { Cell, CodeCell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

import { badgeText, badgeTitle, IOutputInfo, isMessage, ISummary, outputKey } from './model';
import { badgeNode } from './panel';

export const BADGE_ROW_CLASS = 'sdc-BadgeRow';
const HAS_BADGE_CLASS = 'sdc-mod-badged';
/** On our renderer's node when the server's classification disagrees with its record. */
export const OVERRULED_CLASS = 'sdc-mod-overruled';

/** The output-area child widgets of a code cell, in output order. */
export function outputChildren(cell: Cell): ReadonlyArray<Widget> {
  if (!(cell instanceof CodeCell) || !cell.outputArea) {
    return [];
  }
  return cell.outputArea.widgets;
}

/** Add, update or remove the badges of every output of `panel`. */
export function decorate(panel: NotebookPanel, summary: ISummary, enabled: boolean): void {
  const byKey = new Map<string, IOutputInfo>();
  for (const info of summary.outputs) {
    byKey.set(outputKey(info.cellIndex, info.outputIndex), info);
  }
  panel.content.widgets.forEach((cell, ci) => {
    outputChildren(cell).forEach((child, oi) => {
      const info = byKey.get(outputKey(ci, oi));
      const existing = child.node.querySelector(`:scope > .${BADGE_ROW_CLASS}`) as HTMLElement | null;
      // One badge per output: our renderer's header already says it (unless the server disagrees,
      // e.g. an edited output), and the extension's own messages need none.
      const own = child.node.querySelector('.sdc-Output') as HTMLElement | null;
      const ownSays = own ? own.dataset.status : undefined;
      // the digest check overrules the record an output carries (an output edited by hand keeps
      // its "cleared" record): the renderer's own header then gives way to the badge that says
      // what the check found, never two badges that contradict each other (issue 24.8)
      if (own) {
        own.classList.toggle(OVERRULED_CLASS, !!info && ownSays !== undefined && ownSays !== info.status);
      }
      if (!enabled || !info || (info.cleared && isMessage(info)) || (ownSays !== undefined && ownSays === info.status)) {
        existing?.remove();
        child.removeClass(HAS_BADGE_CLASS);
        return;
      }
      const text = badgeText(info);
      const title = badgeTitle(info);
      if (existing && existing.dataset.status === info.status && existing.dataset.text === text && existing.title === title) {
        return;
      }
      existing?.remove();
      const row = document.createElement('div');
      row.className = BADGE_ROW_CLASS;
      row.dataset.status = info.status;
      row.dataset.text = text;
      row.title = title;
      const badge = badgeNode(info, text);
      badge.setAttribute('role', 'note');
      badge.setAttribute('aria-label', title.split('\n')[0]);
      row.appendChild(badge);
      if (info.reasons.length && info.status !== 'pass') {
        const first = document.createElement('span');
        first.className = 'sdc-BadgeRow-reason';
        first.textContent = info.reasons[0];
        row.appendChild(first);
      }
      child.node.insertBefore(row, child.node.firstChild);
      child.addClass(HAS_BADGE_CLASS);
    });
  });
}

/** The output child widget of (cell, output), if rendered. */
export function outputNode(panel: NotebookPanel, cellIndex: number, outputIndex: number): HTMLElement | null {
  const cell = panel.content.widgets[cellIndex];
  if (!cell) {
    return null;
  }
  const child = outputChildren(cell)[outputIndex];
  return child ? child.node : null;
}

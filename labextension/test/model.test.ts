/**
 * Unit tests of the classification logic (src/model.ts), run with node's test runner:
 * `npm test` in labextension/ (from `make test`).
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';

import {
  badgeText,
  classifyOutput,
  effectiveGuard,
  exportCode,
  guardMessage,
  guardTitle,
  IOutputLike,
  isGuarded,
  formatCarriesOutputs,
  isMessage,
  isPlaceholder,
  localClearance,
  outputStatus,
  redactedName,
  statusBarText,
  needsAttention,
  stripAnsi,
  summarise,
  totalsText,
  versionWarning
} from '../src/model';
import { asPayload, codeRows, headerText, kernelNote, reasonsToShow, SDC_MIME, statusLabel } from '../src/payload';

function table(status: string, extra: Partial<IOutputLike> = {}, record: object = {}): IOutputLike {
  return {
    output_type: 'display_data',
    data: { 'text/html': '<table></table>', 'text/plain': 'table' },
    metadata: {
      sdc_magic: { schema: 1, id: 'out-1', status, kind: 'table', hidden: 0, cells: 4, reasons: [], notes: [], ...record }
    },
    ...extra
  };
}

const stream: IOutputLike = { output_type: 'stream', name: 'stdout', text: 'C0001 42\n' } as IOutputLike;
const error: IOutputLike = { output_type: 'error', ename: 'ValueError', evalue: 'bad', traceback: [] } as IOutputLike;
const image: IOutputLike = { output_type: 'display_data', data: { 'image/png': 'iVBOR', 'text/plain': '<Figure>' }, metadata: {} };

describe('localClearance mirrors sdc_magic.redact.clearance (without the digest)', () => {
  it('lets pass and suppressed tables through', () => {
    assert.equal(localClearance(table('pass')), null);
    assert.equal(localClearance(table('suppressed')), null);
    assert.equal(localClearance(table('pass', { output_type: 'execute_result' })), null);
  });
  it('stops review and blocked with the status as reason', () => {
    assert.equal(localClearance(table('review')), 'status review');
    assert.equal(localClearance(table('blocked')), 'status blocked');
  });
  it('stops prints, errors and outputs without a record', () => {
    assert.equal(localClearance(stream), 'stream output');
    assert.equal(localClearance(error), 'error output');
    assert.equal(localClearance(image), 'no sdc_magic record');
    assert.equal(localClearance({ output_type: 'display_data', data: { 'text/plain': 'x' } }), 'no sdc_magic record');
    assert.equal(localClearance({}), 'unknown output');
  });
  it('stops a pass record on a bundle with mime types the kernel did not check', () => {
    const forged = table('pass', { data: { 'text/html': '<b>x</b>', 'text/plain': 'x', 'image/png': 'AAAA' } });
    assert.equal(localClearance(forged), 'unchecked mime types image/png');
  });
  it('accepts the widget view next to the checked table (its state is dropped on export)', () => {
    const withWidget = table('suppressed', {
      data: { 'text/html': '<table/>', 'text/plain': 't', 'application/vnd.jupyter.widget-view+json': { model_id: 'm' } }
    });
    assert.equal(localClearance(withWidget), null);
  });
  it('stops records that are not objects or have an unknown status', () => {
    assert.equal(localClearance({ output_type: 'display_data', data: {}, metadata: { sdc_magic: 'pass' } }), 'no sdc_magic record');
    assert.equal(localClearance(table('cleared')), 'status cleared');
  });
});

describe('outputStatus', () => {
  it('shows the record status of cleared, review and blocked outputs', () => {
    assert.equal(outputStatus(table('pass')), 'pass');
    assert.equal(outputStatus(table('suppressed')), 'suppressed');
    assert.equal(outputStatus(table('review')), 'review');
    assert.equal(outputStatus(table('blocked')), 'blocked');
  });
  it('calls printed text and values the kernel marked working notes, never cleared', () => {
    assert.equal(outputStatus(stream), 'note');
    assert.equal(localClearance(stream), 'stream output');
    const value = { output_type: 'execute_result', data: { 'text/plain': "{'k': 3}" },
      metadata: { sdc_magic: { schema: 1, kind: 'note', status: 'note', notes: ['a Python value, not a table'] } } };
    assert.equal(outputStatus(value as IOutputLike), 'note');
    assert.equal(localClearance(value as IOutputLike), 'status note');
    assert.equal(classifyOutput(value as IOutputLike).cleared, false);
    assert.match(classifyOutput(value as IOutputLike).reasons[0], /a Python value, not a table/);
    assert.equal(badgeText(classifyOutput(value as IOutputLike)), 'working note');
    // warnings on stderr (the print guard's among them) are not notes
    assert.equal(outputStatus({ output_type: 'stream', name: 'stderr' } as IOutputLike), 'uncleared');
    // a note record on another status, or a kind note beside a pass, is not a note
    const forged = { ...value, metadata: { sdc_magic: { kind: 'note', status: 'pass' } } };
    assert.notEqual(outputStatus(forged as IOutputLike), 'note');
  });
  it('calls everything else uncleared', () => {
    assert.equal(outputStatus(error), 'uncleared');
    assert.equal(outputStatus(image), 'uncleared');
    assert.equal(outputStatus(table('cleared')), 'uncleared');
    assert.equal(outputStatus(table('pass', { data: { 'text/plain': 'x', 'application/json': {} } })), 'uncleared');
  });
  it('calls a pass record uncleared when the server rejects its digest', () => {
    const info = classifyOutput(table('pass'), 3, 0, {}, 'digest does not match the content');
    assert.equal(info.status, 'uncleared');
    assert.equal(info.cleared, false);
    assert.equal(info.why, 'digest does not match the content');
    assert.ok(info.reasons.some(r => r.includes('changed after it was checked')));
  });
});

describe('classifyOutput', () => {
  it('counts hidden cells by rule and keeps the notes', () => {
    const out = table('suppressed', {}, {
      hidden: 3,
      notes: ['3 cells hidden'],
      reasons: [
        { cell: ['a', 'x'], position: [0, 0], hidden: '✕', reasons: [{ rule: 'threshold', message: 'count 2 is under 5' }] },
        { cell: ['b', 'x'], position: [1, 0], hidden: '✕', reasons: [{ rule: 'threshold', message: 'count 1 is under 5' }, { rule: 'singletons', message: 'one case' }] },
        { cell: ['c', 'x'], position: [2, 0], hidden: '✕', reasons: [{ rule: 'secondary', message: 'protects a' }] }
      ]
    });
    const info = classifyOutput(out, 2, 1, { cell_type: 'code', source: 'df.groupby("a").size()\n', execution_count: 7 });
    assert.equal(info.status, 'suppressed');
    assert.equal(info.cleared, true);
    assert.equal(info.hidden, 3);
    assert.deepEqual(info.rules, { threshold: 2, singletons: 1, secondary: 1 });
    assert.equal(info.reasons[0], '3 cells hidden');
    assert.ok(info.reasons[1].startsWith('threshold: 2 cells hidden — e.g. count 2 is under 5'));
    assert.equal(info.executionCount, 7);
    assert.equal(info.source, 'df.groupby("a").size()');
    assert.equal(info.id, 'out-1');
    assert.equal(badgeText(info), 'cleared, cells hidden · 3 hidden');
  });
  it('explains uncleared outputs in plain words', () => {
    assert.match(classifyOutput(stream).reasons[0], /printed text: for your own work, not checked, never exported/);
    assert.match(classifyOutput(error).reasons[0], /error message ValueError/);
    assert.match(classifyOutput(image).reasons[0], /image\/png/);
    assert.equal(badgeText(classifyOutput(stream)), 'working note');
    // text without a record may be a table from a kernel without the extension: not a note
    const value = { output_type: 'execute_result', data: { 'text/plain': "{'k': 3}" }, metadata: {} };
    assert.equal(outputStatus(value as IOutputLike), 'uncleared');
    assert.match(classifyOutput(value as IOutputLike).reasons[0], /not checked by sdc_magic \(text\/plain\)/);
  });
  it('survives malformed records', () => {
    const weird = { output_type: 'display_data', data: {}, metadata: { sdc_magic: { status: 'blocked', reasons: [null, { reasons: 'x' }], notes: 'x', hidden: '5' } } };
    const info = classifyOutput(weird as unknown as IOutputLike);
    assert.equal(info.status, 'blocked');
    assert.equal(info.hidden, 0);
  });
});

describe('summarise', () => {
  const cells = [
    { cell_type: 'markdown', source: '# title' },
    { cell_type: 'code', source: '%load_ext sdc_magic', outputs: [stream] },
    { cell_type: 'code', source: 'referrals.head(3)', outputs: [table('blocked', {}, { kind: 'row-level' })] },
    { cell_type: 'code', source: 'by_area', outputs: [table('pass')] },
    { cell_type: 'code', source: 'cells', outputs: [table('suppressed', {}, { hidden: 12 }), error] },
    { cell_type: 'code', source: 'x', outputs: [table('review')] },
    { cell_type: 'code', source: 'nothing', outputs: [] }
  ];
  it('classifies every output of every code cell with its indices', () => {
    const { outputs, totals } = summarise(cells);
    assert.deepEqual(
      outputs.map(o => [o.cellIndex, o.outputIndex, o.status]),
      [
        [1, 0, 'note'],
        [2, 0, 'blocked'],
        [3, 0, 'pass'],
        [4, 0, 'suppressed'],
        [4, 1, 'uncleared'],
        [5, 0, 'review']
      ]
    );
    assert.deepEqual(totals, { pass: 1, suppressed: 1, review: 1, blocked: 1, uncleared: 1, note: 1, cleared: 2, notCleared: 4, total: 6 });
    assert.equal(statusBarText(totals), 'sdc: 2 cleared · 3 not cleared · 1 note');
    assert.equal(needsAttention(totals), 3);
    assert.equal(totalsText(totals), '6 outputs: 1 cleared · 1 cleared, cells hidden · 1 needs review · 1 blocked · 1 not cleared · 1 working note');
  });
  it('without the kernel extension everything is uncleared', () => {
    const bare = [{ cell_type: 'code', outputs: [{ output_type: 'execute_result', data: { 'text/html': '<table>' }, metadata: {} }, stream] }];
    const { totals } = summarise(bare);
    assert.equal(totals.uncleared, 1);
    assert.equal(totals.notCleared, 2);
    assert.equal(statusBarText(totals), 'sdc: 0 cleared · 1 not cleared · 1 note');
  });
  it('applies the server answers by cell and output index; the server decides', () => {
    const server = new Map<string, string | null>([
      ['3:0', 'digest does not match the content'],
      ['4:0', null],
      ['2:0', 'status blocked']
    ]);
    const { totals, outputs } = summarise(cells, server);
    assert.equal(outputs[1].status, 'blocked');
    assert.equal(outputs[2].status, 'uncleared');
    assert.equal(outputs[3].status, 'suppressed');
    assert.equal(totals.cleared, 1);
  });
  it('trusts the server when its rule is wider than the local mirror', () => {
    const extra = [{ cell_type: 'code', outputs: [table('pass', { data: { 'text/plain': 'x', 'application/x-new': 1 } })] }];
    assert.equal(summarise(extra).outputs[0].status, 'uncleared');
    assert.equal(summarise(extra, new Map([['0:0', null]])).outputs[0].status, 'pass');
  });
  it('handles an empty notebook', () => {
    assert.equal(statusBarText(summarise([]).totals), 'sdc: 0 cleared · 0 not cleared');
    assert.equal(totalsText(summarise([]).totals), '0 outputs');
  });
});

describe('guard and settings', () => {
  it('guards the download and export commands only', () => {
    for (const id of ['docmanager:download', 'notebook:export-to-format', 'filebrowser:download', 'filebrowser:copy-download-link']) {
      assert.ok(isGuarded(id), id);
    }
    assert.ok(!isGuarded('docmanager:save'));
    assert.ok(!isGuarded('notebook:run-all-cells'));
  });
  it('says how many outputs and why', () => {
    assert.equal(guardTitle(3), '3 outputs are not cleared for release');
    assert.equal(guardTitle(1), '1 output is not cleared for release');
    assert.match(
      guardMessage(3, { 'stream output': 2, 'status blocked': 1 }),
      /^Not cleared: 2 × printed text; 1 × blocked\. The notebook as it is would take them along\./
    );
    assert.match(guardMessage(1), /^The notebook as it is would take it along/);
  });
  it('names the redacted copy', () => {
    assert.equal(redactedName('work/analysis.ipynb'), 'analysis.redacted.ipynb');
    assert.equal(redactedName('a.b.ipynb', '.html'), 'a.b.redacted.html');
  });
  it('lets users switch the guard off unless an administrator locked it', () => {
    assert.deepEqual(effectiveGuard({ guardEnabled: false }, { guardEnabled: true, guardLocked: false }), { enabled: false, locked: false });
    assert.deepEqual(effectiveGuard({ guardEnabled: true }, { guardEnabled: true }), { enabled: true, locked: false });
    // overrides.json changed the defaults: the user's false does not count
    assert.deepEqual(effectiveGuard({ guardEnabled: false, guardLocked: false }, { guardEnabled: true, guardLocked: true }), { enabled: true, locked: true });
    // a user setting guardLocked in their own settings changes nothing
    assert.deepEqual(effectiveGuard({ guardEnabled: false, guardLocked: true }, { guardEnabled: true, guardLocked: false }), { enabled: false, locked: false });
    // an administrator may also lock it off
    assert.deepEqual(effectiveGuard({ guardEnabled: true }, { guardEnabled: false, guardLocked: true }), { enabled: false, locked: true });
  });
});

describe('versions and kernel replies', () => {
  it('warns on a missing route, a failure and a mismatch', () => {
    assert.equal(versionWarning('0.1.0', { status: 200, version: '0.1.0' }), null);
    assert.match(versionWarning('0.1.0', { status: 404 })!, /not enabled.*jupyter server extension list/);
    assert.match(versionWarning('0.1.0', { status: 200, version: '0.2.0' })!, /lab extension 0\.1\.0, server extension 0\.2\.0/);
    assert.match(versionWarning('0.1.0', { status: 500 })!, /HTTP 500/);
    assert.match(versionWarning('0.1.0', null)!, /did not answer/);
  });
  it('builds the export magic and cleans tracebacks', () => {
    assert.equal(exportCode('build/export'), '%sdc export build/export --force');
    assert.equal(exportCode('my dir'), '%sdc export "my dir" --force');
    assert.equal(exportCode(''), '%sdc export --force');
    assert.equal(
      exportCode('x', ['out-3', null, 'out-7', 'out-3', 'bad id;rm']),
      '%sdc export x --force --only=out-3,out-7'
    );
    assert.equal(exportCode('', []), '%sdc export --force --only=');
    assert.equal(stripAnsi('\u001b[0;31mUsageError\u001b[0m: bad'), 'UsageError: bad');
  });
});

describe('one vocabulary, harmless messages and placeholders', () => {
  it('labels every status in the users\' words', () => {
    assert.deepEqual(['pass', 'suppressed', 'review', 'blocked', 'uncleared', 'note'].map(statusLabel), [
      'cleared',
      'cleared, cells hidden',
      'needs review',
      'blocked',
      'not cleared',
      'working note'
    ]);
  });
  it('treats the extension\'s messages as cleared, without a badge', () => {
    const banner: IOutputLike = {
      output_type: 'display_data',
      data: { 'text/plain': 'sdc_magic loaded' },
      metadata: { sdc_magic: { schema: 1, kind: 'message', status: 'pass', hidden: 0, cells: 0, digest: 'x' } }
    };
    const info = classifyOutput(banner);
    assert.equal(info.status, 'pass');
    assert.ok(info.cleared && isMessage(info));
    assert.ok(!isMessage(classifyOutput(table('pass'))));
  });
  it('keeps the redactor\'s placeholders cleared (a redacted copy opens clean), but not edited ones', () => {
    const why = 'stream output';
    const placeholder: IOutputLike = {
      output_type: 'display_data',
      data: { 'text/plain': `[sdc_magic: output removed — it was not cleared for release (${why})]` },
      metadata: { sdc_magic_redacted: { reason: why } }
    };
    assert.ok(isPlaceholder(placeholder));
    assert.equal(localClearance(placeholder), null);
    assert.equal(classifyOutput(placeholder).status, 'pass');
    const edited = { ...placeholder, data: { 'text/plain': 'C0001 42' } };
    assert.ok(!isPlaceholder(edited));
    assert.equal(classifyOutput(edited).status, 'uncleared');
  });
  it('lets the payload mime type through but nothing else new', () => {
    assert.equal(localClearance(table('suppressed', { data: { 'text/plain': 'x', [SDC_MIME]: { version: 1 } } })), null);
    assert.match(String(localClearance(table('pass', { data: { 'text/plain': 'x', 'application/json': {} } }))), /unchecked mime/);
  });
  it('does not guard the script export (code only)', () => {
    assert.ok(!formatCarriesOutputs('script') && !formatCarriesOutputs('python'));
    assert.ok(formatCarriesOutputs('html') && formatCarriesOutputs('markdown') && formatCarriesOutputs('notebook'));
  });
});

describe('payload helpers', () => {
  const payload = {
    version: 1, id: 'out-2', status: 'suppressed', label: 'cleared, cells hidden', kind: 'table',
    summary: '3 of 8 cells hidden', rules: 'threshold 5', hidden: 3, cells: 8, notes: [],
    table: { shape: [4, 2], index_names: ['a'], column_names: [''], columns: [['x', 'y']], rows: [], row_gap: null, col_gap: null },
    reasons: Array.from({ length: 75 }, (_, i) => ({ cell: `r${i}`, row: i, col: 0, why: 'fewer than 5 records', interval: '' })),
    reasons_total: 75, suggestions: null, more: false, answer: '', exception: null
  };
  it('reads a payload and refuses anything else', () => {
    assert.ok(asPayload(payload));
    assert.ok(asPayload(JSON.stringify(payload)));
    assert.equal(asPayload({ version: 2, id: 'x', table: {} }), null);
    assert.equal(asPayload('not json'), null);
  });
  it('lists 60 reasons, then all on request', () => {
    const p = asPayload(payload)!;
    assert.equal(reasonsToShow(p, false).length, 60);
    assert.equal(reasonsToShow(p, true).length, 75);
    assert.equal(headerText(p), '3 of 8 cells hidden · out-2');
  });
  it('says why kernel actions are off', () => {
    assert.match(String(kernelNote(null)), /No kernel/);
    assert.match(String(kernelNote({ status: 'dead', connected: false })), /not running/);
    assert.equal(kernelNote({ status: 'idle', connected: true }), null);
    assert.equal(codeRows('a'), 2);
    assert.equal(codeRows('a\n'.repeat(40)), 12);
    assert.equal(codeRows('x'.repeat(120)), 2); // one line and its sideways scrollbar
    assert.equal(codeRows('a\n' + 'x'.repeat(120) + '\nb'), 4);
  });
});

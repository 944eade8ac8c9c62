/**
 * Bidi controls in labels (issue 24.5): a label holding U+202E (right-to-left override)
 * would reverse the rest of the sentence that quotes it. The text the extension draws shows
 * them as `⟨U+202E⟩`, as the kernel's text/plain and HTML fallbacks do (the right-to-left
 * marks U+200E/U+200F of real right-to-left text are left alone); the labels are also drawn
 * inside `<bdi>` where a sentence quotes them.
 */
const CONTROLS = /[\u202a-\u202e\u2066-\u2069]/g;

export function visibleBidiControls(text: string): string {
  return text.replace(CONTROLS, c => `⟨U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}⟩`);
}

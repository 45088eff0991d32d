// The advice about a run that needs the user, as text: `status` prints it and the view shows it.

/** Tasks in doubt: what it means, and the command that submits them again (and what that risks). */
export function inDoubtAdvice(count: number, manifest: string): string {
  return `${count} task(s) in doubt: sent, but the answer was lost, so they may have been charged. Check the account, then \`mediabatch run ${manifest} --retry-in-doubt\` submits them again (possibly charged twice).`;
}

/** Unfinished tasks of a run that is not going: the command that continues it. */
export function unfinishedAdvice(count: number, manifest: string): string {
  return `${count} task(s) unfinished: \`mediabatch run ${manifest}\` continues the run.`;
}

// `view [run]`: serves the live page over the state file until Ctrl-C (the logic is in src/view/).

import { EXIT } from '../errors.js';
import { openView, untilInterrupted, type ViewContext, type ViewFlags } from '../view.js';

export async function viewCommand(
  run: string | undefined,
  flags: ViewFlags,
  ctx: ViewContext,
): Promise<number> {
  const view = await openView(ctx, flags, run, ctx.io.stdout);
  try {
    await untilInterrupted(ctx.io);
  } finally {
    await view.close();
  }
  return EXIT.ok;
}

// Types of the page's own helpers (the API's answers are in api-types.d.ts).

/** What `h()` takes as children: nodes, text, numbers, nothing, or lists of those. */
export type Child = Node | string | number | null | undefined | false | readonly Child[];

/** Where the hash router is. */
export type Route =
  | { page: 'runs' }
  | { page: 'run'; run: string }
  | { page: 'task'; run: string; task: string };

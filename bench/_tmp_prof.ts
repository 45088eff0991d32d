import { describeRun } from '../src/account/index.js';
import { openReadOnlyStore } from '../src/store/index.js';
const store = openReadOnlyStore(process.argv[2]!);
for (let i = 0; i < 3; i++) { const t = performance.now(); const a = describeRun(store, 'big-2026-01-05'); console.log('describeRun', Math.round(performance.now() - t), JSON.stringify(a.money.by_kind), JSON.stringify(a.estimate), a.money.charged); }
const t = performance.now(); const s = store.accountSumsByScan('big-2026-01-05'); console.log('scan', Math.round(performance.now() - t), JSON.stringify(s));
console.log(Math.round(process.resourceUsage().maxRSS/1024), 'MB');

// The page imports uPlot as the view serves it (/assets/uPlot.esm.js); its types are the npm package's.
export { default } from 'uplot/dist/uPlot';

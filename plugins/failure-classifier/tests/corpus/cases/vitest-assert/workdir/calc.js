export const cube = (x) => x * x;

export const cube = (x) => x ** 3;

export const net = (p) => p / 1.2;

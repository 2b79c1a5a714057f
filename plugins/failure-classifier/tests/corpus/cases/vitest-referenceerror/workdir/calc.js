export const area = (r) => PI * r * r;

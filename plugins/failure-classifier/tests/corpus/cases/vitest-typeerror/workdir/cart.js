export const total = (cart) => cart.items.reduce((a, b) => a + b, 0);

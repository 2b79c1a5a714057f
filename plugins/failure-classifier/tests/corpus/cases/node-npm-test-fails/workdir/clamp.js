exports.clamp = (x, lo, hi) => Math.max(x, lo);

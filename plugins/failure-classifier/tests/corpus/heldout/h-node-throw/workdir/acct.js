class Overdraft extends Error {}
exports.withdraw = (b, n) => { if (n > b) throw new Overdraft('balance too low'); return b - n; };

exports.withTax = (p) => p * 1.2 + 1;

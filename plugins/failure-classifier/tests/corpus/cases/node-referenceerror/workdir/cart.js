exports.total = (items) => items.reduce((a, b) => a + b, tax);

exports.valid = (s) => s.length > 3;

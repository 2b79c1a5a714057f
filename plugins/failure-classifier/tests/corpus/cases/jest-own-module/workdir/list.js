exports.uniq = (xs) => [...new Set(xs)];

exports.uniq = (xs) => xs;

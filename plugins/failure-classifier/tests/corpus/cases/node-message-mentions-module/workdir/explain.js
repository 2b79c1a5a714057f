exports.explain = (m) => `missing ${m}`;

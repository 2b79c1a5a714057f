exports.client = { fetch: 1 };

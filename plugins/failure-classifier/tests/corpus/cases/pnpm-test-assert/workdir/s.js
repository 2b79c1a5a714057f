exports.slug = (t) => t.toLowerCase();

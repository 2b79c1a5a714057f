const { fmt } = require('./format');
exports.show = (x) => fmt(x);

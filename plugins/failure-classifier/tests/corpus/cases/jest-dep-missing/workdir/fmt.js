const dayjs = require('dayjs');
exports.day = (d) => dayjs(d).format('D');

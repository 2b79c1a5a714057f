const { uniq } = require('./lists');
test('uniq', () => expect(uniq([1, 1])).toEqual([1]));

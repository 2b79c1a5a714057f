const { day } = require('./fmt');
test('day', () => expect(day('2024-01-02')).toBe('2'));

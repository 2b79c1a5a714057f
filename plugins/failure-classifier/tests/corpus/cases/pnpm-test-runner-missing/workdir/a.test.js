test('a', () => expect(1).toBe(1));

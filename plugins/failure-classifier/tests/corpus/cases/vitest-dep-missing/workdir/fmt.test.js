import { test, expect } from 'vitest';
import { day } from './fmt.js';
test('day', () => expect(day('2024-01-02')).toBe('2'));

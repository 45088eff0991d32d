import { describe, expect, it } from 'vitest';
import { resultFileName, taskFolderName } from '../../src/results/names.js';

describe('taskFolderName', () => {
  it.each([
    ['hero-mug-studio', 'hero-mug-studio'],
    ['line_12', 'line_12'],
    ['café', 'café'],
  ])('keeps a safe id %s as it is', (id, expected) => {
    expect(taskFolderName(id)).toBe(expected);
  });

  it.each([
    '../x',
    '../../etc/passwd',
    'a/b',
    'a\\b',
    '.hidden',
    '..',
    '.',
    '',
    'con',
    'x\u0000y',
    ' ',
    'a:b*c?',
  ])('turns the hostile id %j into one plain folder name', (id) => {
    const name = taskFolderName(id);
    for (const bad of ['/', '\\', '\u0000', ':', '*', '?']) expect(name).not.toContain(bad);
    expect(name.startsWith('.')).toBe(false);
    expect(name.length).toBeGreaterThan(0);
    expect(name.length).toBeLessThanOrEqual(80);
  });

  it('keeps very long ids bounded and distinct', () => {
    const a = taskFolderName('x'.repeat(500) + 'a');
    const b = taskFolderName('x'.repeat(500) + 'b');
    expect(a.length).toBeLessThanOrEqual(80);
    expect(a).not.toBe(b);
  });

  it('never maps two different ids to one folder', () => {
    expect(taskFolderName('a/b')).not.toBe(taskFolderName('a_b'));
    expect(taskFolderName('a b')).not.toBe(taskFolderName('a?b'));
  });
});

describe('resultFileName', () => {
  it('names files by position and kind only', () => {
    expect(resultFileName(1, 'png')).toBe('1.png');
    expect(resultFileName(2, '../mp3')).toBe('2.mp3');
  });
});

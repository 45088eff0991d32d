import { describe, expect, it } from 'vitest';
import { CATALOG, type MediaDurations, type ModelId, type RequestBody } from '../../src/catalog/index.js';
import { vary } from './cases.js';

const U = undefined;

// [model, change to the base request, measured lengths, expected issue paths with words, or [] when fine]
const cases: [ModelId, RequestBody, MediaDurations, [string, string][]][] = [
  // talking avatar, normal mode: output = shorter of video and audio, must be 3-60 s without duration
  ['ai-talking-avatar-video', {}, { video_url: 30, audio_url: 40 }, []],
  ['ai-talking-avatar-video', {}, { video_url: 3, audio_url: 3 }, []],
  // without duration, neither file may be over 60 s (the spec allows longer media only with duration)
  ['ai-talking-avatar-video', {}, { video_url: 60, audio_url: 60 }, []],
  [
    'ai-talking-avatar-video',
    {},
    { video_url: 60, audio_url: 90 },
    [['audio_url', 'must be at most 60 s without duration, measured 90 s']],
  ],
  [
    'ai-talking-avatar-video',
    {},
    { video_url: 2.9, audio_url: 40 },
    [['video_url', 'must be 3 to 60 s, measured 2.9 s']],
  ],
  [
    'ai-talking-avatar-video',
    {},
    { video_url: 61, audio_url: 70 },
    [
      ['video_url', 'measured 61 s; set duration (3 to 60)'],
      ['audio_url', 'measured 70 s; set duration (3 to 60)'],
    ],
  ],
  [
    'ai-talking-avatar-video',
    {},
    { video_url: 90, audio_url: 60.5 },
    [
      ['video_url', 'must be at most 60 s without duration, measured 90 s'],
      ['audio_url', 'must be at most 60 s without duration, measured 60.5 s'],
    ],
  ],
  ['ai-talking-avatar-video', {}, { audio_url: 2 }, [['audio_url', 'must be 3 to 60 s, measured 2 s']]],
  ['ai-talking-avatar-video', {}, { video_url: 100 }, [['video_url', 'measured 100 s']]],
  // with duration, the media may be longer than 60 s but not shorter than duration
  ['ai-talking-avatar-video', { duration: 60 }, { video_url: 200, audio_url: 300 }, []],
  ['ai-talking-avatar-video', { duration: 20 }, { video_url: 20, audio_url: 25 }, []],
  [
    'ai-talking-avatar-video',
    { duration: 21 },
    { video_url: 20, audio_url: 25 },
    [['duration', 'must not exceed the output length 20 s']],
  ],
  ['ai-talking-avatar-video', { duration: 21 }, { video_url: 20 }, [['duration', 'the video is 20 s']]],
  // loop mode: output = the audio; a short video is played back and forth
  ['ai-talking-avatar-video', { video_mode: 'loop' }, { video_url: 2, audio_url: 30 }, []],
  [
    'ai-talking-avatar-video',
    { video_mode: 'loop' },
    { video_url: 10, audio_url: 61 },
    [['audio_url', 'must be at most 60 s without duration, measured 61 s']],
  ],
  [
    'ai-talking-avatar-video',
    { video_mode: 'loop', duration: 40 },
    { video_url: 10, audio_url: 30 },
    [['duration', 'got 40']],
  ],
  ['ai-talking-avatar-video', { video_mode: 'loop', duration: 30 }, { video_url: 10, audio_url: 30 }, []],
  // dance: reference video max 30 s measured; duration never above it
  ['ai_dance_move', {}, { video_url: 30 }, []],
  [
    'ai_dance_move',
    {},
    { video_url: 30.5 },
    [['video_url', 'reference video must be at most 30 s, measured 30.5 s']],
  ],
  ['ai_dance_move', { duration: 12 }, { video_url: 12.3 }, []],
  [
    'ai_dance_move',
    { duration: 13 },
    { video_url: 12.3 },
    [['duration', "must not exceed the reference video's measured length 12.3 s, got 13"]],
  ],
  // voice cover: song 5-360 s, reference voice >= 3 s
  ['voice-cover', {}, { audio_url: 5, reference_audio_url: 3 }, []],
  ['voice-cover', {}, { audio_url: 360, reference_audio_url: 25 }, []],
  ['voice-cover', {}, { audio_url: 4.9 }, [['audio_url', 'must be 5 to 360 s long, measured 4.9 s']]],
  ['voice-cover', {}, { audio_url: 360.5 }, [['audio_url', 'must be 5 to 360 s long, measured 360.5 s']]],
  [
    'voice-cover',
    {},
    { reference_audio_url: 2.9 },
    [['reference_audio_url', 'at least 3 s of one clear voice, measured 2.9 s']],
  ],
  // song-replace-section: section <= 50% of the song, inside the song
  ['song-replace-section', { infill_start_s: 30, infill_end_s: 45 }, { audio_url: 90 }, []],
  ['song-replace-section', { infill_start_s: 0, infill_end_s: 15 }, { audio_url: 30 }, []],
  [
    'song-replace-section',
    { infill_start_s: 0, infill_end_s: 15.01 },
    { audio_url: 30 },
    [['infill_end_s', 'at most 50% of the song (15 s of 30 s)']],
  ],
  [
    'song-replace-section',
    { infill_start_s: 100, infill_end_s: 120 },
    { audio_url: 110 },
    [['infill_end_s', 'must be within the song (110 s), got 120']],
  ],
  // the earlier song's audio_duration, when the source is task_id + audio_id
  [
    'song-replace-section',
    { audio_url: U, task_id: 't', audio_id: 'a', infill_start_s: 0, infill_end_s: 40 },
    { audio_id: 60 },
    [['infill_end_s', 'at most 50%']],
  ],
  // face swap: a window that starts after the video ends converts nothing
  ['video-face-swap', { start_time: 5 }, { reference_video: 8 }, []],
  [
    'video-face-swap',
    { start_time: 8 },
    { reference_video: 8 },
    [['start_time', 'must be before the end of reference_video (measured 8 s)']],
  ],
  // nothing measured: nothing to say
  ['ai-talking-avatar-video', { duration: 60 }, {}, []],
  ['voice-cover', {}, {}, []],
];

describe('rules on measured media lengths', () => {
  it.each(cases)('%s %j with %j', (model, patch, media, expected) => {
    const entry = CATALOG[model];
    const checked = entry.check(vary(model, patch));
    if (!checked.ok) throw new Error(JSON.stringify(checked.issues));
    const issues = entry.checkMedia(checked.body, media);
    expect(issues.map((i) => i.path)).toEqual(expected.map(([path]) => path));
    expected.forEach(([, words], n) => {
      expect(issues[n]?.message).toContain(words);
    });
  });
});

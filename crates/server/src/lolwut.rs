//! LOLWUT [VERSION v] [columns rows ...]: a computer-art drawing and the
//! version line, as Redis answers it. The drawing is Kvasir's own, after
//! Georg Nees' "Schotter" (rows of squares falling into disorder), drawn
//! with ASCII characters on a grid; the same arguments draw the same
//! picture.

use bytes::Bytes;
use kvasir_core::args::{eq_ic, parse_i64};
use kvasir_core::CmdError;

/// The text of LOLWUT for `args` (after the command name).
pub fn render(args: &[Bytes]) -> Result<String, CmdError> {
    let mut rest = args;
    if let [v, version, tail @ ..] = rest {
        if eq_ic(v, "version") {
            parse_i64(version).map_err(|_| CmdError::NotInteger)?;
            rest = tail;
        }
    }
    let mut nums = [66i64, 8, 12];
    for (slot, arg) in nums.iter_mut().zip(rest) {
        *slot = parse_i64(arg).map_err(|_| CmdError::NotInteger)?;
    }
    let cols = nums[0].clamp(1, 1000) as usize;
    let per_row = nums[1].clamp(1, 200) as usize;
    let rows = nums[2].clamp(1, 200) as usize;
    let cell = (cols / per_row).max(3);
    // Squares are at most 8 lines tall: the canvas stays within about
    // 1,600 x 1,000 characters whatever the arguments.
    let box_h = (cell / 2).clamp(2, 8);
    let width = cell * per_row;
    let height = rows * box_h;
    let mut grid = vec![vec![b' '; width]; height];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut random = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for r in 0..rows {
        for c in 0..per_row {
            // Disorder grows with the row, as in Nees' plot.
            let spread = (r * 2 / rows.max(1)) as i64 + (r as i64) / 4;
            let jitter = |v: u64| (v % (2 * spread as u64 + 1)) as i64 - spread;
            let x0 = (c * cell) as i64 + jitter(random());
            let y0 = (r * box_h) as i64 + jitter(random()) / 2;
            let (w, h) = (cell as i64 - 1, box_h as i64 - 1);
            for dx in 0..=w {
                for dy in [0, h] {
                    put(&mut grid, x0 + dx, y0 + dy, b'-');
                }
            }
            for dy in 1..h {
                for dx in [0, w] {
                    put(&mut grid, x0 + dx, y0 + dy, b'|');
                }
            }
        }
    }
    let mut out = String::new();
    for line in grid {
        out.push_str(String::from_utf8_lossy(&line).trim_end());
        out.push('\n');
    }
    out.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15 (Kvasir ");
    out.push_str(env!("CARGO_PKG_VERSION"));
    out.push_str(")\n");
    Ok(out)
}

fn put(grid: &mut [Vec<u8>], x: i64, y: i64, ch: u8) {
    if x >= 0 && y >= 0 {
        if let Some(cell) = grid
            .get_mut(y as usize)
            .and_then(|row| row.get_mut(x as usize))
        {
            *cell = ch;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_the_same_picture_for_the_same_arguments() {
        let a = render(&[]).expect("drawn");
        assert_eq!(a, render(&[]).expect("drawn"));
        assert!(a.ends_with(")\n") && a.contains("Redis ver. "), "{a}");
        assert!(a.contains('-') && a.contains('|'));
        let small = render(&[
            Bytes::from_static(b"VERSION"),
            Bytes::from_static(b"5"),
            Bytes::from_static(b"20"),
        ])
        .expect("drawn");
        assert!(small.lines().all(|l| l.len() <= 80));
        assert!(render(&[Bytes::from_static(b"VERSION"), Bytes::from_static(b"x")]).is_err());
        // The largest arguments draw a bounded canvas.
        let huge = render(&[
            Bytes::from_static(b"1000"),
            Bytes::from_static(b"1"),
            Bytes::from_static(b"200"),
        ])
        .expect("drawn");
        assert!(huge.len() < 2_000_000, "{} bytes", huge.len());
    }
}

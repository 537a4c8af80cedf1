//! Least squares for the slip fits (`crate::trace`): three terms, every one at least 0.

/// The least-squares solution of the normal equations `xtx * w = xty` with every `w >= 0`:
/// of the solutions with some terms held at 0 (all 8 subsets of three), the feasible one with
/// the smallest squared error. Clamping an unconstrained solution instead (a negative intercept
/// set to 0, its slope kept) overstates the slope.
pub(super) fn nonnegative(xtx: &[[f64; 3]; 3], xty: &[f64; 3]) -> [f64; 3] {
    let mut best = ([0.0; 3], 0.0);
    for mask in 1u8..8 {
        let free: Vec<usize> = (0..3).filter(|i| mask & (1 << i) != 0).collect();
        // The restricted system: the free terms' rows and columns, the others held at 0.
        let mut a = [[0.0; 3]; 3];
        let mut b = [0.0; 3];
        for (i, row) in a.iter_mut().enumerate() {
            row[i] = 1.0;
        }
        for &i in &free {
            for &j in &free {
                a[i][j] = xtx[i][j];
            }
            b[i] = xty[i];
        }
        let Some(w) = solve(a, b) else { continue };
        if w.iter().any(|v| !v.is_finite() || *v < 0.0) {
            continue;
        }
        // Squared error up to a constant: w'Aw - 2 w'b.
        let quad: f64 = (0..3)
            .map(|i| (0..3).map(|j| w[i] * xtx[i][j] * w[j]).sum::<f64>())
            .sum();
        let error = quad - 2.0 * (0..3).map(|i| w[i] * xty[i]).sum::<f64>();
        if error < best.1 {
            best = (w, error);
        }
    }
    best.0
}

/// Gaussian elimination with partial pivoting; `None` for a singular system (too few or too
/// uniform traces to separate the terms).
fn solve(mut a: [[f64; 3]; 3], mut b: [f64; 3]) -> Option<[f64; 3]> {
    for col in 0..3 {
        let pivot = (col..3).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-9 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        for row in col + 1..3 {
            let factor = a[row][col] / a[col][col];
            let pivot_row = a[col];
            for (cell, above) in a[row].iter_mut().zip(pivot_row).skip(col) {
                *cell -= factor * above;
            }
            b[row] -= factor * b[col];
        }
    }
    let mut x = [0.0; 3];
    for row in (0..3).rev() {
        let rest: f64 = (row + 1..3).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - rest) / a[row][row];
    }
    Some(x)
}
